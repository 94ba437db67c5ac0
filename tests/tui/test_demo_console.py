"""`lockconsole demo`'s console in a real terminal (tmux, 100x30): the console's trigger of the
demo job succeeds and bills (it finds the demo's config without $LOCKCONSOLE_CONFIG, which only
the fleet's processes get), and the describe screen of the stale holder shows its query and,
without scrolling, how to release it.

The demo runs with a temporary XDG_STATE_HOME (never a user's demo data); `q` stops the
console, the fleet and the embedded server."""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.support.helpers import Terminal, unavailable, wait_for
from tests.support.settings import ROOT

NIGHT = 20  # the demo's default night: billing takes a quarter of it, the lock is free after


@pytest.fixture
def terminal(tmp_path: Path, uid: str) -> Iterator[Terminal]:
    term = Terminal(f"lockconsole-demo-{uid}", tmp_path, size=(100, 30))
    yield term
    term.close()


def binary() -> str:
    path = Path(sys.executable).parent / "lockconsole"
    if not os.access(path, os.X_OK):
        unavailable(f"the installed lockconsole script is missing at {path} (pip install -e .)")
    return str(path)


def escape(terminal: Terminal) -> None:
    """Escape on its own (a key sent right after it would read as Alt+key), then the dashboard
    with no log overlay."""
    terminal.press("Escape")
    terminal.wait_screen(
        lambda s: "Lock holders" in s and "Log: output" not in s, "the dashboard after esc"
    )


def manual_runs(url: str) -> list[tuple[int, str]]:
    """(id, outcome) of every manual (console-triggered) run of nightly_billing, oldest first."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select id, outcome from lockconsole_runs "
            "where job = 'nightly_billing' and trigger = 'manual' order by id"
        ).fetchall()
    return [(int(i), str(o)) for i, o in rows]


def ended_after(url: str, known: int) -> list[tuple[int, str]] | None:
    """The manual runs once one more than `known` has ended (skipped or finished), else None."""
    runs = manual_runs(url)
    return runs if len(runs) > known and runs[-1][1] != "acquired" else None


def billed(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "select count(*) from invoices i join lockconsole_runs r on r.id = i.run_id "
            "where r.trigger = 'manual' and r.outcome = 'succeeded'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_demo_console_trigger_succeeds_and_describe_shows_the_stale_query(
    terminal: Terminal, reachable_tmp: Path
) -> None:
    state = reachable_tmp / "state"  # the demo's embedded PostgreSQL keeps its data here
    env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
    env |= {
        "TERM": "xterm-256color",
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(state),
        "PYTHONPATH": str(ROOT),
    }
    terminal.start([binary(), "demo", "--night-seconds", str(NIGHT)], env)
    terminal.wait_screen(
        lambda s: "Lock holders" in s and "billing ● ok" in s, "the demo's console", timeout=180
    )
    config = (state / "lockconsole" / "lockconsole-demo.toml").read_text()
    url = next(line.split('"')[1] for line in config.splitlines() if line.startswith("url"))

    # the trigger: 1 (jobs), the first job is nightly_billing, t, then h (here: this console runs
    # it, the path that once failed with "no configuration found"). While the fleet holds the
    # lock the run is skipped (and said so), so wait for the lock to be free and try again.
    outcome = ""
    for _ in range(6):
        before = manual_runs(url)
        terminal.wait_screen(
            lambda s: re.search(r"nightly_billing +free", s), "the lock free", timeout=60
        )
        terminal.press("1")
        terminal.press("Home")
        terminal.press("t")
        terminal.wait_screen(lambda s: "Run nightly_billing now?" in s, "the trigger question")
        terminal.press("h")
        done = wait_for(
            functools.partial(ended_after, url, len(before)),
            what="the trigger's outcome in the ledger",
            timeout=60,
        )
        outcome = done[-1][1]
        if outcome == "succeeded":
            break
        assert outcome == "skipped", done
        escape(terminal)
    assert outcome == "succeeded", outcome
    terminal.wait_screen(
        lambda s: "trigger nightly_billing: succeeded" in " ".join(s.split()), "the log's line"
    )
    assert billed(url) > 0, "the console's run charged tenants, like the fleet's runs"

    # the stale holder: pane 2, the cursor on invoice_reminders' holder, Enter describes it
    escape(terminal)
    terminal.press("2")
    terminal.press("Home")
    terminal.wait_screen(lambda s: "STALE" in s, "the stale holder in pane 2", timeout=60)
    screen = ""
    for _ in range(20):
        terminal.press("Enter")
        screen = terminal.wait_screen(
            lambda s: s.lstrip().startswith(("Lock holder ·", "Lock waiter ·")), "describe"
        )
        if "invoice_reminders" in screen.splitlines()[0]:
            break
        escape(terminal)
        terminal.press("Down")
    assert "invoice_reminders" in screen.splitlines()[0], screen
    flat = " ".join(screen.split())
    assert "! STALE" in flat and "query" in flat and "advisory" in flat, screen
    # the release hint stays in view without scrolling: the line under the body, over the footer
    terminal.wait_screen(
        lambda s: (
            "x: Terminate PostgreSQL backend pid" in " ".join(s.rstrip().splitlines()[-2].split())
        ),
        "the release hint over the footer",
    )

    escape(terminal)
    terminal.press("q")
    assert terminal.exit_status() == 0
