"""The real `lockconsole` console in a real terminal (tmux) over a PostgreSQL that hangs.

The database is reached through a loopback proxy of the test's own (tests/support/tcp_proxy.py). Its
`hang()` is the instant of the hang: from then on every connection, open or new, is kept open
and never answered. The screen is read with `tmux capture-pane -p` and must show, within the
console's own timeouts, that the data is no longer ok; then that the database is down and how
old the data is, the same age in the status line, the banner, every pane title and the jobs
pane's cells; NEXT goes on to the following firing instead of sitting at "(in 0s)". After
`resume()` the status line says ok again and nothing is marked old.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockconsole.config.loader import parse_config
from lockconsole.console.waits import budget_of
from lockconsole.tui.app import AGES_EVERY
from lockconsole.tui.freshness import SLACK

from tests.support.helpers import Tmux, unavailable
from tests.support.settings import ROOT
from tests.support.tcp_proxy import SwitchableProxy, proxied

WIDTH, HEIGHT = 160, 40
REFRESH = 1.0
LOAD = 2.0  # seconds of slack for a machine busy with other tests (two shared cores)


@pytest.fixture
def proxied_database(own_database: str) -> Iterator[tuple[SwitchableProxy, str]]:
    """The test's own database behind a proxy of its own, and the URL through it."""
    peer, url = proxied(own_database, 5432, SwitchableProxy)
    yield peer, url
    peer.close()


def config_text(url: str) -> str:
    return (
        f'[console]\nrefresh = "{REFRESH:g}s"\nconnect_timeout = "1s"\n'
        'statement_timeout = "3s"\n'
        f'[databases.flaky]\nurl = "{url}"\n'
        '[jobs.nightly]\ndatabase = "flaky"\nstrategy = "pg-session"\nschedule = "* * * * *"\n'
    )


def status_line(lines: list[str]) -> str:
    """The status line: the first line naming the database with a data age."""
    return next((ln for ln in lines[:4] if "flaky " in ln and "data " in ln), "")


def jobs_row(lines: list[str]) -> str:
    return next((ln for ln in lines if ln.strip().startswith("nightly ")), "")


def ages(lines: list[str]) -> dict[str, list[str]]:
    """Every age the screen gives the data: status line, banner, pane titles, jobs cells."""
    titles = [ln for ln in lines if ln.startswith("─") and " old─" in ln]
    return {
        "status": re.findall(r"data (\S+) old", status_line(lines)),
        "database": re.findall(r"flaky ◌ (\S+) old", status_line(lines)),
        "banner": [
            a for ln in lines for a in re.findall(r"showing the last good .*\((\S+) old\)", ln)
        ],
        "titles": [a for ln in titles for a in re.findall(r"— (\S+) old─", ln)],
        "cells": re.findall(r"unknown \((\S+) old\)", jobs_row(lines)),
    }


def next_cell(lines: list[str]) -> tuple[str, str] | None:
    """NEXT of the jobs pane: the firing's clock time and the '(in …)' that counts down to it."""
    found = re.search(r"(\d\d:\d\d:\d\d) \(in ([^)]+)\)", jobs_row(lines))
    return (found.group(1), found.group(2)) if found else None


def marked_old(lines: list[str]) -> bool:
    """Some part of the screen says the data is old (the status line's data age is always
    there: 'data 21ms old' is no mark)."""
    return any(v for k, v in ages(lines).items() if k != "status")


def agreeing(lines: list[str]) -> str | None:
    """The one age every part of the screen gives, or None while they differ."""
    found = ages(lines)
    every = [a for values in found.values() for a in values]
    wanted = {"status": 1, "banner": 1, "titles": 3, "cells": 2}
    if any(len(found[k]) != n for k, n in wanted.items()) or len(set(every)) != 1:
        return None
    return every[0]


def test_a_hung_database_is_old_data_on_the_real_console_then_ok_again(
    proxied_database: tuple[SwitchableProxy, str], tmp_path: Path
) -> None:
    import shutil

    if shutil.which("tmux") is None:
        unavailable("tmux is not installed (apt-get install tmux)")
    proxy, url = proxied_database
    text = config_text(url)
    config = tmp_path / "lockconsole.toml"
    config.write_text(text)
    budget = budget_of(parse_config(text, str(config), {}).console)
    binary = Path(sys.executable).with_name("lockconsole")
    command = [str(binary)] if binary.exists() else [sys.executable, "-m", "lockconsole"]
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "HOME": os.environ.get("HOME", "/")}
    term = Tmux([*command, "--config", str(config)], env, WIDTH, HEIGHT)
    try:
        term.wait(lambda s: "flaky ● ok" in status_line(s), "the first data, ok")
        assert not marked_old(term.screen()), "nothing is old before the hang"

        proxy.hang()
        hung_at = time.monotonic()
        # a read is fresh for the interval and SLACK; the age is repainted every AGES_EVERY
        late = REFRESH + SLACK + AGES_EVERY + LOAD
        screen = term.wait(
            lambda s: (line := status_line(s)) != "" and "● ok" not in line, "no ok", late
        )
        took = time.monotonic() - hung_at
        assert took <= late, f"'ok' for {took:.1f} s into the hang"
        assert "flaky ◌ " in status_line(screen) or "flaky ✖ down" in status_line(screen)

        # the next refresh waits the console's budget for an answer, then says down
        down_by = REFRESH + budget + AGES_EVERY + LOAD
        screen = term.wait(lambda s: "flaky ✖ down" in status_line(s), "down", down_by)
        assert any("⚠ flaky: " in ln for ln in screen), "the banner names the database"
        screen = term.wait(lambda s: agreeing(s) is not None, "one age everywhere", 10)
        age = agreeing(screen) or ""
        assert re.fullmatch(r"\d+(\.\d)?s", age), f"seconds old, not {age!r}"
        assert float(age[:-1]) >= REFRESH + SLACK, f"the data was read before the hang: {age}"
        assert "● ok" not in status_line(screen)

        # NEXT counts down to its firing while the database is down, then names the next one
        first = next_cell(screen)
        assert first is not None, jobs_row(screen)
        zeros: list[float] = []

        def moved_on(lines: list[str]) -> bool:
            cell = next_cell(lines)
            if cell is not None and cell[1] == "0s":
                zeros.append(time.monotonic())
            return cell is not None and cell[0] != first[0]

        screen = term.wait(moved_on, "NEXT moves on to the following firing", 60 + 2 * LOAD)
        assert "flaky ✖ down" in status_line(screen), "the database stayed down meanwhile"
        then = next_cell(screen)
        assert then is not None and then[1] != "0s", then
        assert not zeros or zeros[-1] - zeros[0] <= AGES_EVERY + LOAD, "NEXT sat at (in 0s)"
        assert agreeing(term.wait(lambda s: agreeing(s) is not None, "one age", 10))

        proxy.resume()
        back_by = REFRESH + budget + AGES_EVERY + LOAD
        screen = term.wait(lambda s: "flaky ● ok" in status_line(s), "ok again", back_by)
        screen = term.wait(lambda s: not marked_old(s), "nothing old any more", 5)
        assert not any("showing the last good" in ln for ln in screen), "the banner is gone"
        term.keys("q")
    finally:
        term.close()
