"""The console tells the whole truth, driven by Pilot against real PostgreSQL.

(a) paused, the data age keeps growing on screen and the status line says the data is not
being refreshed; (b) a job whose database is down shows `unknown` with the age of its last
good data, never `free` or `never`, and comes back when the database does; (c) the timeline
tells slots seconds apart from one another, and follows the dashboard's refresh.

The clock the app reads is the real one plus a shift the test moves, so ages jump without
waiting. Thread workers are not awaited: each test polls with `pilot.pause` up to a deadline.
"""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from rich.text import Text
from textual.widgets import Static

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, parse_config
from lockconsole.console.facade import Console
from lockconsole.model.jobs import Outcome, Run, Trigger
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.timeline import SlotBlock, TimelineScreen
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import sync, until
from tests.support.tcp_proxy import SwitchableProxy

SIZE = (140, 40)


def make_config(databases: dict[str, str], uid: str) -> Config:
    text = '[console]\nconnect_timeout = "2s"\nstatement_timeout = "5s"\n'
    for name, url in databases.items():
        text += (
            f'[databases.{name}]\nurl = "{url}"\n'
            f'[jobs.{name}_{uid}]\ndatabase = "{name}"\nstrategy = "pg-session"\n'
        )
    return parse_config(text, "test.toml", {})


@pytest.fixture
def uid() -> str:
    return uuid.uuid4().hex[:8]


def status(app: LockConsoleApp) -> str:
    return str(app.query_one("#status", Static).render())


def job_cells(app: LockConsoleApp, job: str) -> list[str]:
    table = app.dashboard.query_one("#jobs", PaneTable)
    if job not in table.row_keys:
        return []
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(job)]


@sync
async def test_paused_the_data_age_grows_and_the_status_line_says_so(
    pg_url: str, uid: str, shifted: list[timedelta]
) -> None:
    config = make_config({"main": pg_url}, uid)
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5, clock=lambda: datetime.now(UTC) + shifted[0])
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None, what="the first snapshot")
            await pilot.press("p")
            await until(pilot, lambda: app.refresh_started is None, what="the last refresh")
            taken = app.snapshot.taken_at
            assert "PAUSED: data" in status(app) and "not refreshing" in status(app)
            shifted[0] = timedelta(minutes=7)  # seven minutes pass, paused
            await until(
                pilot,
                lambda: "PAUSED: data 7m0" in status(app),
                what="the paused data age to count on by itself",
            )
            assert app.snapshot.taken_at == taken  # no new data
            await pilot.press("p")
            await until(
                pilot,
                lambda: app.snapshot.taken_at > taken,
                what="a refresh after resuming",
            )


@sync
async def test_a_down_databases_job_shows_unknown_with_the_age_of_its_last_good_data(
    pg_url: str, uid: str, shifted: list[timedelta]
) -> None:
    target = pg_url.rsplit("@", 1)[1].split("/", 1)[0]
    host, port = target.rsplit(":", 1)
    proxy = SwitchableProxy((host, int(port)))
    dbname = pg_url.rsplit("/", 1)[1]
    flaky = f"postgresql://postgres@127.0.0.1:{proxy.port}/{dbname}"
    config = make_config({"flaky": flaky, "steady": pg_url}, uid)
    Ledger(config.databases["steady"]).create_schema()
    down_job, up_job = f"flaky_{uid}", f"steady_{uid}"
    try:
        with Console(config) as console:
            app = LockConsoleApp(console, refresh=0.5, clock=lambda: datetime.now(UTC) + shifted[0])
            async with app.run_test(size=SIZE) as pilot:
                await until(
                    pilot,
                    lambda: job_cells(app, down_job)[1:3] == ["free", "never"],
                    what="the flaky job's good data",
                )
                proxy.cut()
                await until(pilot, lambda: "flaky" in app.errors, 30, "the flaky database down")
                shifted[0] = timedelta(minutes=3)
                cells = await until(
                    pilot,
                    lambda: (
                        (c := job_cells(app, down_job)) and c[1].startswith("unknown (3m") and c
                    ),
                    what="unknown, with the age of the last good data",
                )
                assert cells[2].startswith("unknown (3m"), cells  # LAST: its ledger is down too
                assert "free" not in cells and "never" not in cells
                steady = job_cells(app, up_job)
                assert steady[1:3] == ["free", "never"], steady  # the other database is fine
                proxy.restore()
                await until(
                    pilot,
                    lambda: job_cells(app, down_job)[1:3] == ["free", "never"],
                    30,
                    "the flaky database back",
                )
    finally:
        proxy.close()


@sync
async def test_the_timeline_tells_sub_minute_slots_apart_and_follows_the_refresh(
    own_database: str, uid: str
) -> None:
    # a ledger of its own: in the shared one, other tests' newer runs fill history_limit
    config = make_config({"main": own_database}, uid)
    job = f"main_{uid}"
    base = (datetime.now(UTC) - timedelta(minutes=30)).replace(second=0, microsecond=0)

    def record(slot: datetime) -> None:
        with Ledger(config.databases["main"]) as ledger:
            ledger.record(
                Run(
                    job=job,
                    slot=slot,
                    instance="web-1",
                    host="h",
                    pid=1,
                    trigger="scheduled",
                    outcome="succeeded",
                    started_at=slot + timedelta(seconds=1),
                    finished_at=slot + timedelta(seconds=3),
                    exit_code=0,
                )
            )

    for second in (0, 20, 40):
        record(base + timedelta(seconds=second))
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: job_cells(app, job), what="the job's row")
            app.dashboard.query_one("#jobs", PaneTable).focus()
            rows = app.dashboard.query_one("#jobs", PaneTable).row_keys
            app.dashboard.query_one("#jobs", PaneTable).move_cursor(row=rows.index(job))
            await pilot.press("s")
            # the screen is current before its slot blocks are mounted: wait for all three
            screen = await until(
                pilot,
                lambda: (
                    isinstance(app.screen, TimelineScreen)
                    and len(app.screen.query(SlotBlock)) >= 3
                    and app.screen
                ),
                what="the timeline with its three slots",
            )
            headings = [b.heading().plain for b in screen.query(SlotBlock)]
            labels = [base + timedelta(seconds=s) for s in (40, 20, 0)]
            for heading, slot in zip(headings[:3], labels, strict=True):  # newest first
                assert slot.strftime("%H:%M:%S") in heading, headings
            assert len(set(headings[:3])) == 3
            assert screen.selected == 0 and screen.slots[0] == labels[0]  # the newest slot
            record(base + timedelta(minutes=1))  # a newer slot arrives while it is open
            await until(
                pilot,
                lambda: len(app.screen.query(SlotBlock)) == len(headings) + 1,
                what="the timeline to follow the refresh",
            )
            assert isinstance(app.screen, TimelineScreen)
            assert app.screen.slots[app.screen.selected] == labels[0]  # the selection stays


def test_runs_of_jobs_not_in_this_config_are_marked_and_raise_no_alerts(
    pg_url: str, uid: str
) -> None:
    """A shared ledger: another configuration's failed run is listed, marked, never alerted;
    a skipped manual run of ours is listed too (it has no slot report), with who asked."""
    from lockconsole.tui.pane_rows import NOT_CONFIGURED, history_rows

    config = make_config({"main": pg_url}, uid)
    ours, theirs = f"main_{uid}", f"theirs_{uid}"
    now = datetime.now(UTC)
    with Ledger(config.databases["main"]) as ledger:
        recorded: tuple[tuple[str, Trigger, Outcome, str | None], ...] = (
            (theirs, "scheduled", "failed", None),
            (ours, "manual", "skipped", "alice@ops-1"),
        )
        for job, trigger, outcome, actor in recorded:
            ledger.record(
                Run(
                    job=job,
                    slot=now - timedelta(minutes=1),
                    instance=f"i-{job}",
                    host="h",
                    pid=1,
                    trigger=trigger,
                    outcome=outcome,
                    started_at=now - timedelta(seconds=50),
                    finished_at=now - timedelta(seconds=49),
                    actor=actor,
                )
            )
    with Console(config) as console:
        snap = console.snapshot(duplicates=False)
    assert {r.job for r in snap.runs} >= {ours, theirs}
    assert not [a for a in snap.alerts if a.job == theirs]
    rows, _ = history_rows(snap, now, configured=set(config.jobs))
    cells = {str(c[4]): [str(x) for x in c] for _, c in rows if str(c[4]).startswith("i-")}
    assert f"{theirs} · {NOT_CONFIGURED}" in cells[f"i-{theirs}"]
    mine = cells[f"i-{ours}"]
    assert mine[1] == ours and "manual by alice@ops-1" in mine and "skipped" in mine


@sync
async def test_log_lines_carry_their_time() -> None:
    from textual.widgets import RichLog

    from tools.sample import FROZEN_NOW
    from tools.sample_console import SampleConsole

    now = [FROZEN_NOW]
    app = LockConsoleApp(SampleConsole(), clock=lambda: now[0], refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: app.snapshot is not None, what="the sample data")
        now[0] = FROZEN_NOW + timedelta(seconds=7)
        app.log_line("trigger nightly_billing: starting")
        await pilot.pause()
        lines = [strip.text for strip in app.query_one("#log", RichLog).lines]
        stamp = (FROZEN_NOW + timedelta(seconds=7)).strftime("%H:%M:%S")
        assert f"{stamp} trigger nightly_billing: starting" in lines, lines
        alerts = [line for line in lines if "alert: " in line]
        assert alerts and all(re.match(r"\d\d:\d\d:\d\d alert: ", a) for a in alerts), alerts


def test_last_counts_from_the_attempt_not_from_its_slot() -> None:
    """A job without a schedule ran 8 s ago in the slot of its UTC minute, 59 s ago."""
    from lockconsole.console.snapshot.reports import slot_reports
    from lockconsole.model.views import JobStatus, Snapshot
    from lockconsole.tui.pane_rows import job_rows

    config = make_config({"main": "postgresql://u@127.0.0.1/x"}, "x")
    job = config.job("main_x")
    slot = datetime(2026, 11, 29, 3, 7, 0, tzinfo=UTC)
    now = slot + timedelta(seconds=59)
    ran = Run(
        job=job.name,
        slot=slot,
        instance="web-1",
        host="h",
        pid=1,
        trigger="scheduled",
        outcome="succeeded",
        started_at=slot + timedelta(seconds=50),
        finished_at=slot + timedelta(seconds=51),
        id=1,
    )
    reports = slot_reports(
        [job], [ran], now=now, lookback=timedelta(days=1), grace=timedelta(minutes=5)
    )
    snap = Snapshot(now, (JobStatus(job, None, None, ran),), (), (ran,), tuple(reports))
    [(_, cells)] = job_rows(snap, now)
    assert str(cells[2]) == "ok web-1 8s ago"


def test_a_timestamp_in_a_duplicate_row_is_in_the_one_time_format() -> None:
    from lockconsole.tui.screens.duplicates import _cell

    aware = datetime(2026, 11, 29, 2, 0, 22, 710000, tzinfo=UTC)
    assert str(_cell(aware)) == "2026-11-29 02:00:22.710 UTC"
    assert str(_cell(aware.replace(microsecond=0, tzinfo=None))) == "2026-11-29 02:00:22"
