"""Steering from the dashboard: the pause key (a modal asks for the note, the jobs pane shows who
paused the job, since when and why; the same key on a paused job asks, then resumes it;
read-only refuses it), the run detail showing the run's kept output, and the trigger asking
where: on the fleet (on any instance, or on one named instance) or here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from textual.widgets import Input, Static

from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.confirm import ConfirmModal
from lockconsole.tui.screens.pause import PauseModal
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import settle, sync, until


def app_for(console: Any, **kwargs: Any) -> LockConsoleApp:
    return LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600, **kwargs)


def jobs_text(app: LockConsoleApp) -> str:
    table = app.query_one("#jobs", PaneTable)
    return "\n".join(" ".join(str(c) for c in table.get_row_at(i)) for i in range(table.row_count))


@sync
async def test_pause_key_asks_a_note_shows_the_pause_and_resumes() -> None:
    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        job = console.snapshot().jobs[0].job.name
        app.query_one("#jobs", PaneTable).focus()
        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, PauseModal), what="the note modal")
        await pilot.press("enter")  # an empty note is refused: the modal stays
        await pilot.pause()
        assert isinstance(app.screen, PauseModal)
        app.screen.query_one("#note", Input).value = "incident 42\nsee the runbook"
        await pilot.press("enter")
        await until(pilot, lambda: "PAUSED by ops@console" in jobs_text(app), what="the pause")
        assert "incident 42" in jobs_text(app)
        assert next(s for s in console.snapshot().jobs if s.job.name == job).pause is not None

        await pilot.press("P")
        await until(pilot, lambda: isinstance(app.screen, ConfirmModal), what="resume question")
        # the question's own paragraphs are set apart; the note's newline (data) is an escape
        body = str(app.screen.query_one("#body", Static).render())
        assert "incident 42\\x0asee the runbook\n\nResume it:" in body, body
        await pilot.press("y")
        await until(pilot, lambda: "PAUSED" not in jobs_text(app), what="the resume")
        assert all(s.pause is None for s in console.snapshot().jobs)


@sync
async def test_pause_key_is_refused_read_only() -> None:
    console = SampleConsole(read_only=True)
    app = app_for(console, read_only=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        await pilot.press("P")
        await pilot.pause()
        assert not isinstance(app.screen, PauseModal)
        assert all(s.pause is None for s in console.snapshot().jobs)


@sync
async def test_run_detail_shows_the_runs_kept_output() -> None:
    from textual.widgets import Static

    from lockconsole.tui.screens.run_detail import RunDetailScreen

    app = app_for(SampleConsole())
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(app, pilot)
        app.query_one("#history", PaneTable).focus()
        await pilot.press("i")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), what="run detail")

        def output() -> str:
            return str(app.screen.query_one("#output", Static).render())

        await until(pilot, lambda: "charged 120" in output(), what="the output tail")


@sync
async def test_trigger_asks_where_and_follows_the_fleet_request_in_the_log() -> None:
    from textual.widgets import RichLog

    from lockconsole.tui.screens.fleet import TriggerModal

    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        app.query_one("#jobs", PaneTable).focus()
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TriggerModal), what="where to run")
        offered = app.screen.query_one("#instance", Input).placeholder
        assert "lately: web-" in offered, offered  # where the job ran, from the ledger's runs
        await pilot.press("enter")  # the default: on the fleet, on any instance

        def log() -> str:
            return "\n".join(line.text for line in app.query_one("#log", RichLog).lines)

        await until(pilot, lambda: "succeeded on web-2 (run 999)" in log(), what="the outcome")
        # each log line starts with its time
        lines = [ln[ln.index("request 1 ") :] for ln in log().splitlines() if "request 1 " in ln]
        assert [line.split(": ", 1)[1] for line in lines] == [
            "queued",
            "running on web-2 (run 999)",
            "succeeded on web-2 (run 999)",
        ]
        assert console.requested == [(console.snapshot().jobs[0].job.name, None)]
        assert console.triggered == []  # nothing ran here


@sync
async def test_trigger_from_the_history_pane_reruns_that_slot_on_the_fleet() -> None:
    from lockconsole.tui.screens.fleet import TriggerModal

    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=(160, 40)) as pilot:
        await settle(app, pilot)
        history = app.query_one("#history", PaneTable)
        history.focus()
        await pilot.pause()
        run = app.dashboard.runs_of[history.selected_key][0]
        assert run.trigger == "scheduled"
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, TriggerModal), what="where to run")
        modal = app.screen
        assert isinstance(modal, TriggerModal) and modal.slot == run.slot
        await pilot.press("h")  # a slot is rerun by the fleet only: "here" is not offered
        await pilot.pause()
        assert isinstance(app.screen, TriggerModal)
        await pilot.press("enter")
        await until(pilot, lambda: console.requested_slots == [run.slot], what="the request")
        assert console.triggered == []


def test_trigger_on_one_named_instance_of_the_fleet(pg_url: str, uid: str, tmp_path: Path) -> None:
    """`t`, then `i` and an instance's name: the request is for web-2 only, and with web-1
    serving the job as well, web-2 runs it (real PostgreSQL, two request servers)."""
    import asyncio

    from textual.widgets import RichLog

    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import parse_config
    from lockconsole.console.facade import Console
    from lockconsole.serving import RequestServer
    from lockconsole.tui.screens.fleet import TriggerModal

    job = f"billing_{uid}"
    # the job runs until the test has seen it running: the console looks every FOLLOW_EVERY,
    # and a job that ends sooner goes from queued to succeeded between two looks
    go = tmp_path / "go"
    wait = f"while [ ! -e '{go}' ]; do sleep 0.05; done; echo ran"
    config = parse_config(
        f'[databases.pg]\nurl = "{pg_url}"\n[jobs.{job}]\ndatabase = "pg"\n'
        f'strategy = "pg-session"\nkey = {int(uid[:8], 16) + 29}\n'
        f"command = {json.dumps(['sh', '-c', wait])}\n",
        "<test>",
    )
    servers = [
        RequestServer(config, [config.job(job)], instance=name, poll=0.2).start()
        for name in ("web-1", "web-2")
    ]
    console = Console(config, instance="ops")

    async def body() -> None:
        app = LockConsoleApp(console, refresh=3600)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.snapshot is not None, what="the first snapshot")
            await settle(app, pilot)
            table = app.query_one("#jobs", PaneTable)
            table.focus()
            table.move_cursor(row=table.get_row_index(job))
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, TriggerModal), what="where to run")
            await pilot.press("i", *"web-2", "enter")

            def log() -> str:
                return "\n".join(line.text for line in app.query_one("#log", RichLog).lines)

            await until(pilot, lambda: "queued for web-2" in log(), what="the request")
            await until(pilot, lambda: "running on web-2" in log(), what="web-2 taking it")
            go.touch()
            await until(pilot, lambda: "succeeded on web-2" in log(), what="its outcome")

    try:
        asyncio.run(body())
    finally:
        go.touch()  # a job still waiting ends
        for server in servers:
            server.stop()
        console.close()
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        runs = ledger.runs(job)
    assert [(r.instance, r.outcome, r.trigger) for r in runs] == [("web-2", "succeeded", "manual")]
