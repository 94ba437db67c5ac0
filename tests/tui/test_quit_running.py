"""Quitting the console while a run it triggered goes on: it asks; "stop" stops the run
(recorded, lock released) and then quits; "wait" (w, or q again: a second
quit never stops a run unasked) quits when the run ends; Escape stays.
Real PostgreSQL and a real child process."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.confirm import QuitRunModal
from lockconsole.tui.screens.fleet import TriggerModal
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.settings import PYTHON
from tests.support.stop_helpers import STEPS, pg_lock_holder

# Writes "started", waits for the file argv[2] to exist, writes "finished".
UNTIL_TOLD = (
    "import os, sys, time; p = sys.argv[1]; open(p, 'a').write('started\\n'); "
    "[time.sleep(0.02) for _ in iter(lambda: os.path.exists(sys.argv[2]), True)]; "
    "open(p, 'a').write('finished\\n')"
)

SIZE = (100, 30)


def _config(pg_url: str, job: str, key: int, marks: str, arg: str, script: str = STEPS):
    steps = script.replace("\\", "\\\\").replace('"', '\\"')
    return parse_config(
        f'[databases.pg]\nurl = "{pg_url}"\n[jobs.{job}]\ndatabase = "pg"\n'
        f'strategy = "pg-session"\nkey = {key}\nstop_grace = 2\n'
        f'command = ["{PYTHON}", "-c", "{steps}", "{marks}", "{arg}"]\n',
        "<test>",
    )


async def _until(pilot: Any, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := check():
            return value
        await pilot.pause(0.05)
    raise AssertionError("timed out")


async def _trigger(app: LockConsoleApp, pilot: Any, job: str) -> None:
    await _until(pilot, lambda: app.snapshot is not None)
    table = app.query_one("#jobs", PaneTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(job))
    await pilot.press("t")
    await _until(pilot, lambda: isinstance(app.screen, TriggerModal))
    await pilot.press("h")


def _runs(config, job):
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        return ledger.runs(job)


def test_quit_asks_then_stops_the_run(pg_url, pg_conn, uid, tmp_path) -> None:
    job, key = f"quit_{uid}", int(uid[:8], 16) + 13
    marks = tmp_path / "marks"
    config = _config(pg_url, job, key, str(marks), "60")

    async def body() -> None:
        app = LockConsoleApp(Console(config, instance="ops"))
        async with app.run_test(size=SIZE) as pilot:
            await _trigger(app, pilot, job)
            await _until(pilot, marks.exists)
            await pilot.press("q")
            await _until(pilot, lambda: isinstance(app.screen, QuitRunModal))
            await pilot.press("escape")  # stay: nothing changes
            await pilot.pause(0.2)
            assert app.return_code is None and not isinstance(app.screen, QuitRunModal)
            assert pg_lock_holder(pg_conn, key) is not None, "the run goes on"
            await pilot.press("q")
            await _until(pilot, lambda: isinstance(app.screen, QuitRunModal))
            await pilot.press("s")
            await _until(pilot, lambda: app.return_code is not None)
        app.facade.close()

    asyncio.run(body())
    assert pg_lock_holder(pg_conn, key) is None
    (run,) = _runs(config, job)
    assert run.outcome == "failed" and run.message == "stopped from the console (quit)"
    assert "finished" not in marks.read_text(), "the job was stopped"


@pytest.mark.parametrize("key_", ["w", "q"])  # q again: quit as asked, by waiting
def test_quit_and_wait_lets_the_run_finish(pg_url, pg_conn, uid, tmp_path, key_) -> None:
    job, key = f"qwait_{uid}", int(uid[:8], 16) + 17
    marks = tmp_path / "marks"
    told = tmp_path / "finish"
    config = _config(pg_url, job, key, str(marks), str(told), UNTIL_TOLD)

    async def body() -> None:
        app = LockConsoleApp(Console(config, instance="ops"))
        async with app.run_test(size=SIZE) as pilot:
            await _trigger(app, pilot, job)
            await _until(pilot, marks.exists)
            await pilot.press("q")
            await _until(pilot, lambda: isinstance(app.screen, QuitRunModal))
            await pilot.press(key_)
            await pilot.pause(0.2)
            assert app.return_code is None, "it waits for the run"
            told.touch()
            await _until(pilot, lambda: app.return_code is not None)
        app.facade.close()

    asyncio.run(body())
    (run,) = _runs(config, job)
    assert run.outcome == "succeeded"
    assert marks.read_text() == "started\nfinished\n"
    assert pg_lock_holder(pg_conn, key) is None
