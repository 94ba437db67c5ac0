"""The jobs and history panes at a fleet's size: 200 jobs on many instances.

The panes are line-API tables (`PaneTable`) over models the refresh worker lays out
(`pane_models.build_panes`): a refresh paints only the lines on screen, whatever the rows, and
keeps the cursor on its row; each second only the visible jobs are asked for their LAST and
NEXT again; a cell is shown as data (no markup, control characters escaped) and never cut
without a '…'. The last test drives the console against a real PostgreSQL ledger filled in
bulk (generate_series): the jobs pane scrolls to the 200th job, the filter keeps one job, and
older runs load on demand.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
from rich.text import Text

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.console.snapshot.reports import judge_slots
from lockconsole.model.jobs import Database, Job, LockKey
from lockconsole.model.verdict import SlotTally, Span
from lockconsole.model.views import JobStatus, Snapshot
from lockconsole.tui import app as app_module
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.messages import SnapshotLoaded
from lockconsole.tui.pane_models import build_panes
from lockconsole.tui.pane_rows import run_key
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW, make_run
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync, until

JOBS = 200
INSTANCES = 50
MINUTES = 30
SIZE = (160, 50)


def fleet(minutes_on: int = 0, *, message: str | None = None) -> Snapshot:
    """200 per-minute jobs, each slot of a 30-minute lookback judged, a page of 500 runs."""
    now = FROZEN_NOW.replace(second=0, microsecond=0) + timedelta(minutes=minutes_on)
    jobs = [
        Job(
            name=f"fleet_{j:03d}",
            database="main",
            strategy="pg-session",
            key=LockKey("int64", 1000 + j),
            schedule="* * * * *",
        )  # fmt: skip
        for j in range(JOBS)
    ]
    tallies = []
    for j, job in enumerate(jobs):
        for m in range(1, MINUTES + 1):
            slot = now - timedelta(minutes=m)
            ran = Span(
                f"web-{(j + m) % INSTANCES}", "succeeded", slot, slot + timedelta(seconds=2), None
            )
            tallies.append(SlotTally(job.name, slot, False, (ran,), INSTANCES - 1, 0, slot, ()))
    reports = judge_slots(jobs, tallies, now=now, lookback=timedelta(minutes=MINUTES),
                          grace=timedelta(minutes=5))  # fmt: skip
    runs = [
        make_run(
            i + 1,
            jobs[i % JOBS].name,
            now - timedelta(minutes=1 + i // JOBS),
            f"web-{i % INSTANCES}",
            "succeeded",
            0.1,
            2.0,
        )  # fmt: skip
        for i in range(500)
    ]
    if message is not None:
        runs[0] = replace(runs[0], message=message)
    newest = {r.job: r for r in reversed(runs)}
    return Snapshot(
        taken_at=now,
        jobs=tuple(
            JobStatus(j, now + timedelta(minutes=1), None, newest.get(j.name)) for j in jobs
        ),
        runs=tuple(runs),
        slots=tuple(reports),
    )


def plain(cells: Any) -> list[str]:
    return [c.plain if isinstance(c, Text) else str(c) for c in cells]


@sync
async def test_a_fleet_refresh_paints_only_the_visible_lines_and_keeps_the_cursor() -> None:
    console = SampleConsole()
    console.set_snapshot(fleet())
    clock = [FROZEN_NOW.replace(second=0, microsecond=0) + timedelta(seconds=5)]
    app = LockConsoleApp(console, clock=lambda: clock[0], refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        history = app.query_one("#history", PaneTable)
        assert jobs.row_count == JOBS and history.row_count == 500
        await pilot.press("3", "pagedown", "down", "down")
        picked = history.selected_key
        assert picked is not None and history.cursor_row > 2
        await pilot.press("1", "pagedown")
        job = jobs.selected_key
        jobs.painted = history.painted = 0
        # the next minute: a new run of every job on top of the history, every job row changes
        first, moved = fleet(), fleet(1)
        new = tuple(replace(r, id=1000 + (r.id or 0)) for r in moved.runs[:JOBS])
        console.set_snapshot(replace(moved, runs=new + first.runs[: 500 - JOBS]))
        clock[0] += timedelta(minutes=1)
        app.refresh_now()
        await settle(app, pilot)
        assert jobs.selected_key == job, "the jobs cursor stays on its job"
        assert history.selected_key == picked, "the history cursor stays on its run"
        assert history.get_row_index(picked) >= JOBS, "200 newer runs came in above it"
        lines = jobs.size.height + history.size.height
        assert 0 < jobs.painted + history.painted <= 3 * lines, "visible lines only"
        await pilot.press("end")
        assert jobs.selected_key == "fleet_199" and jobs.scroll_y > 0


@sync
async def test_the_refresh_worker_lays_the_panes_out_and_a_filter_typed_meanwhile_wins() -> None:
    console = SampleConsole()
    console.set_snapshot(fleet())
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    threads: list[str] = []
    real = app_module.build_panes

    def spy(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    app_module.build_panes = spy
    try:
        async with app.run_test(size=SIZE) as pilot:
            await first_data(app, pilot)
            board = app.dashboard
            assert threads and threading.main_thread().name not in threads
            assert board.panes is not None and board.panes.view == board.pane_view()
            # a snapshot laid out for no filter arrives after "fleet_007" was typed
            stale = build_panes(fleet(1), board.pane_view(), FROZEN_NOW)
            await pilot.press("slash", *"fleet_007")
            await until(pilot, lambda: app.text_filter == "fleet_007", what="the filter")
            app.post_message(SnapshotLoaded(fleet(1), stale, 0.0))
            await pilot.pause()
            jobs = app.query_one("#jobs", PaneTable)
            assert jobs.row_keys == ["fleet_007"], jobs.row_count
            assert board.panes.view.text_filter == "fleet_007"
    finally:
        app_module.build_panes = real


@sync
async def test_each_second_only_the_visible_jobs_are_asked_for_their_ages() -> None:
    console = SampleConsole()
    console.set_snapshot(fleet())
    start = FROZEN_NOW.replace(second=0, microsecond=0) + timedelta(seconds=5)
    clock = [start]
    app = LockConsoleApp(console, clock=lambda: clock[0], refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        asked: list[str] = []
        live = jobs.live
        assert live is not None

        def counting(key: str) -> Any:
            asked.append(key)
            return live(key)

        jobs.live = counting
        before = plain(jobs.get_row("fleet_000"))[2]
        asked.clear()
        clock[0] = start + timedelta(seconds=1)
        app._count_ages()
        await pilot.pause()
        visible = jobs.size.height
        assert 0 < len(set(asked)) <= visible, (len(set(asked)), visible)
        assert "fleet_199" not in asked
        after = plain(jobs.get_row("fleet_000"))[2]
        assert after != before and after.endswith("ago"), (before, after)
        line = jobs.render_line(1).text
        assert after in line, (after, line)


@sync
async def test_a_cell_is_data_and_is_never_cut_without_a_mark() -> None:
    hostile = "[bold red]boom[/] \x1b[2J" + "x" * 200
    console = SampleConsole()
    snap = fleet(message=hostile)
    console.set_snapshot(snap)
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        history = app.query_one("#history", PaneTable)
        history.focus()
        key = run_key(snap.runs[0])
        history.move_cursor(row=history.get_row_index(key))
        message = plain(history.get_row(key))[-1]
        assert message.startswith("[bold red]boom[/] \\x1b[2J"), message
        assert message.endswith("…") and "\x1b" not in message
        await pilot.press(*["right"] * 20)
        await pilot.pause()
        top = round(history.scroll_y)
        line = history.render_line(history.cursor_row - top + 1).text
        assert "\x1b" not in line and "\\x1b[2J" in line and "x…" in line, line
        # every painted cell is whole, or ends in '…' where its column cuts it
        for index in range(history.row_count):
            for cell, width in zip(history.get_row_at(index), history.widths, strict=False):
                assert cell.cell_len <= width, (cell.plain, width)


def _fill(url: str, jobs: int, instances: int, minutes: int) -> datetime:
    """A ledger of `jobs` per-minute jobs on `instances` instances for `minutes` (bulk)."""
    Ledger(Database("main", parse_url(url))).create_schema()
    with psycopg.connect(url, autocommit=True) as conn:
        [[now]] = conn.execute("select now()").fetchall()
        end = now.astimezone(UTC).replace(second=0, microsecond=0) - timedelta(minutes=1)
        conn.execute(
            """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at,
               exit_code)
            select 'fleet_' || lpad(j::text, 3, '0'), s, 'web-' || i, 'host-' || i, 100 + i,
                   'scheduled',
                   case when i = 1 + ((extract(epoch from s)::bigint / 60 + j) %% %(n)s)
                        then 'succeeded' else 'skipped' end,
                   s + i * interval '10 milliseconds', s + i * interval '10 milliseconds', 0
            from generate_series(0, %(jobs)s - 1) j,
                 generate_series(%(start)s::timestamptz, %(end)s::timestamptz, %(step)s) s,
                 generate_series(1, %(n)s) i
            """,
            dict(
                jobs=jobs,
                n=instances,
                start=end - timedelta(minutes=minutes - 1),
                end=end,
                step=timedelta(minutes=1),
            ),  # fmt: skip
        )
    return end


def _config(url: str, jobs: int) -> str:
    lines = ["[console]", 'lookback = "1h"', 'grace = "5m"', "history_limit = 500",
             "[databases.main]", f'url = "{url}"']  # fmt: skip
    for j in range(jobs):
        lines += [f"[jobs.fleet_{j:03d}]", 'database = "main"', 'schedule = "* * * * *"',
                  'strategy = "pg-session"']  # fmt: skip
    return "\n".join(lines) + "\n"


@sync
async def test_a_real_fleet_ledger_scrolls_filters_and_pages_back(own_database: str) -> None:
    instances, minutes = 10, 30
    _fill(own_database, JOBS, instances, minutes)
    config = parse_config(_config(own_database, JOBS), "fleet.toml", {})
    with Console(config, instance=f"fleet-{uuid.uuid4().hex[:6]}") as console:
        app = LockConsoleApp(console, refresh=3600)
        async with app.run_test(size=SIZE) as pilot:
            await first_data(app, pilot)
            jobs = app.query_one("#jobs", PaneTable)
            history = app.query_one("#history", PaneTable)
            assert jobs.row_count == JOBS
            assert history.row_count == 500, "a page of the newest runs"
            await pilot.press("1", "end")
            assert jobs.selected_key == "fleet_199" and jobs.scroll_y > 0
            last = plain(jobs.get_row("fleet_199"))
            assert "web-" in last[2] and last[2].endswith("ago"), last
            await pilot.press("slash", *"job:fleet_150", "enter")
            await until(pilot, lambda: jobs.row_keys == ["fleet_150"], what="one job left")
            shown = history.row_count
            assert shown > 0 and {plain(history.get_row_at(i))[1] for i in range(shown)} == {
                "fleet_150"
            }
            await pilot.press("3", "m")
            await until(pilot, lambda: history.row_count > shown, what="older runs loaded")
            assert history.row_count <= minutes * instances
            await pilot.press("end")
            oldest = plain(history.get_row_at(history.row_count - 1))
            assert oldest[1] == "fleet_150", oldest


@sync
async def test_a_click_moves_the_cursor_and_a_second_click_describes_the_row() -> None:
    from lockconsole.tui.screens.describe import JobScreen

    app = LockConsoleApp(SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        # the pane's top border, the heading, then the rows: the third row is 4 lines down
        await pilot.click("#jobs", offset=(2, 4))
        await pilot.pause()
        assert jobs.cursor_row == 2 and jobs.has_focus
        wanted = jobs.selected_key
        await pilot.click("#jobs", offset=(2, 4))
        await until(pilot, lambda: isinstance(app.screen, JobScreen), what="the job described")
        assert wanted is not None and wanted in str(
            app.screen.query_one("#describe-title").render()
        )


def test_the_collector_freezes_each_refresh_and_gives_all_back_every_interval() -> None:
    import gc

    from lockconsole.tui.collector import Collector

    now = [0.0]
    collector = Collector(every=600, clock=lambda: now[0])
    try:
        collector.settle()
        assert gc.get_freeze_count() > 0, "what is alive after a refresh is left out"
        now[0] = 599
        collector.settle()
        assert gc.get_freeze_count() > 0
        now[0] = 600
        collector.settle()
        assert gc.get_freeze_count() == 0, "every interval, everything is walked once again"
        collector.settle()
        assert gc.get_freeze_count() > 0
        collector.release()
        assert gc.get_freeze_count() == 0
        collector.settle()
        assert gc.get_freeze_count() == 0, "released: it freezes no more"
    finally:
        gc.unfreeze()


@sync
async def test_the_console_leaves_its_snapshots_out_of_full_collections_until_it_exits() -> None:
    import gc

    console = SampleConsole()
    console.set_snapshot(fleet())
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        assert gc.get_freeze_count() > 0
        app.refresh_now()
        await settle(app, pilot)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0, "given back to the collector when the console exits"


@sync
async def test_a_filter_that_keeps_fewer_rows_of_the_same_widths_shortens_the_scroll() -> None:
    console = SampleConsole()
    console.set_snapshot(fleet())
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        await pilot.press("1", "end")
        assert jobs.scroll_y > 0 and jobs.virtual_size.height == JOBS + 1
        widths = list(jobs.widths)
        await pilot.press("slash", *"fleet_19", "enter")
        await until(pilot, lambda: jobs.row_count == 10, what="ten jobs left")
        await pilot.pause()
        assert jobs.widths == widths, "the same widths: only the rows changed"
        assert jobs.virtual_size.height == 11 and jobs.max_scroll_y == 0
        assert jobs.selected_key is not None and jobs.selected_key.startswith("fleet_19")
