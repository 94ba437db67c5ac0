"""The installed `lockconsole` binary in a real terminal (tmux, 80x24): the dashboard appears,
`?` shows help, `--read-only` hides trigger and release (from the keys and the help), and `q`
exits 0. This runs the real entry point (`cmd_tui`), with no hand-built app."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database

from tests.support.helpers import Terminal, unavailable

TRIGGER_HELP = "Trigger a locked run of the selected job now"
RELEASE_HELP = "Force-release the selected lock holder"


@pytest.fixture
def terminal(tmp_path: Path, uid: str) -> Iterator[Terminal]:
    term = Terminal(f"lockconsole-test-{uid}", tmp_path)
    yield term
    term.close()


def binary() -> str:
    """The `lockconsole` script pip installed next to this Python (the installed entry point)."""
    path = Path(sys.executable).parent / "lockconsole"
    if not os.access(path, os.X_OK):
        unavailable(f"the installed lockconsole script is missing at {path} (pip install -e .)")
    return str(path)


@pytest.mark.parametrize("read_only", [False, True], ids=["read-write", "read-only"])
def test_the_installed_console_in_a_real_terminal(
    terminal: Terminal,
    pg_url: str,
    pg_conn,
    uid: str,
    write_config,
    cli_env: dict[str, str],
    read_only: bool,
) -> None:
    job = f"tty_{uid}"
    config = write_config(f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        schedule = "0 2 * * *"
        command = ["true"]
        """)
    with Ledger(Database("main", parse_url(pg_url))) as ledger:
        ledger.create_schema()  # so the check at the end can count this job's rows
    keep = ("PATH", "HOME", "XDG_CONFIG_HOME")
    env: dict[str, str] = {k: cli_env[k] for k in keep if k in cli_env}
    env |= {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
    flags = ["--read-only"] if read_only else []
    terminal.start([binary(), "--config", str(config), *flags], env)

    dashboard = terminal.wait_screen(lambda s: job in s and "main ● ok" in s, "the dashboard")
    assert "Jobs" in dashboard and "Lock holders" in dashboard and "Run history" in dashboard
    assert ("READ-ONLY" in dashboard) is read_only, dashboard
    assert ("Trigger" in dashboard) is not read_only, dashboard  # the footer's keys

    terminal.press("?")
    help_screen = terminal.wait_screen(lambda s: " Keys " in s and "esc Close" in s, "help")
    flat = " ".join(help_screen.split())  # long descriptions wrap in 80 columns
    assert ("Trigger a locked run" in flat) is not read_only, help_screen
    assert ("Force-release the" in flat) is not read_only, help_screen
    terminal.press("Escape")
    terminal.wait_screen(lambda s: "esc Close" not in s and job in s, "help to close")

    if read_only:  # the removed keys do nothing: no run is started, nothing is written
        terminal.press("t")
        terminal.press("x")
    terminal.press("q")
    assert terminal.exit_status() == 0
    runs = pg_conn.execute("select count(*) from lockconsole_runs where job = %s", (job,))
    assert runs.fetchone() == (0,)
