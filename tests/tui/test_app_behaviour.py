"""Console behaviour that needs no database: keymaps, refreshes that never stack or block the
first frame, worker failures, in-place updates, and the holders view at 10,000 rows.

These use the sample data set (SampleConsole) and stand-ins that are slow or fail on purpose;
database behaviour itself is tested against real servers in test_app_pilot.py.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from typing import Any

from textual.widgets import DataTable, Static
from textual.worker import WorkerFailed

from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.confirm import ReleaseModal
from lockconsole.tui.holder_rows import holder_key
from lockconsole.tui.holders_view import HoldersView
from lockconsole.tui.sample import FROZEN_NOW, SampleConsole, many_holders
from lockconsole.tui.tables import selected_key
from lockconsole.views import Snapshot


def sync(test: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


def app_for(console: Any, **kwargs: Any) -> LockConsoleApp:
    kwargs.setdefault("refresh", 3600)
    return LockConsoleApp(console, clock=lambda: FROZEN_NOW, **kwargs)


async def settle(app: LockConsoleApp, pilot: Any) -> None:
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:  # the app handles it (Worker.StateChanged); the test looks at that
        pass
    await pilot.pause()


def select_stale(app: LockConsoleApp) -> None:
    view = app.query_one(HoldersView)
    view.focus()
    view._move(next(i for i, r in enumerate(view.model.rows) if r.holder and r.holder.stale))


@sync
async def test_keymap_from_the_config_rebinds_by_binding_id() -> None:
    console = SampleConsole()
    console.config = replace(console.config, keymap={"release": "k", "duplicates": "D"})
    app = app_for(console)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        select_stale(app)
        await pilot.press("x")
        await pilot.pause()
        assert not isinstance(app.screen, ReleaseModal)
        await pilot.press("k")
        await pilot.pause()
        assert isinstance(app.screen, ReleaseModal)
        await pilot.press("escape")
        assert (
            "k",
            "Force-release the selected lock holder (type its job name)",
        ) in app.help_rows()


class SlowConsole(SampleConsole):
    """A database that answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.gate = threading.Event()

    def snapshot(self, *, duplicates: bool = False) -> Snapshot:
        self.calls += 1
        self.gate.wait(30)
        return super().snapshot()


@sync
async def test_a_slow_database_blocks_neither_the_first_frame_nor_keys_nor_stacks() -> None:
    console = SlowConsole()
    app = app_for(console, refresh=0.05)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause(1.3)  # many ticks while the first snapshot hangs
            assert app.snapshot is None
            assert console.calls == 1 and app.skipped_ticks >= 3
            status = str(app.query_one("#status", Static).render())
            assert "loading" in status and "refreshing" in status, status
            await pilot.press("p")
            assert app.paused and "PAUSED" in str(app.query_one("#status", Static).render())
            console.gate.set()
            await settle(app, pilot)
            assert app.snapshot is not None and app.query_one(HoldersView).model.total == 5
    finally:
        console.gate.set()


class FlakyConsole(SampleConsole):
    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def snapshot(self, *, duplicates: bool = False) -> Snapshot:
        if self.fail:
            raise RuntimeError("connection refused")
        return super().snapshot()


@sync
async def test_a_failing_refresh_shows_the_banner_keeps_data_and_recovers() -> None:
    console = FlakyConsole()
    app = app_for(console)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        console.fail = True
        app.action_refresh()
        await settle(app, pilot)
        banner = app.query_one("#banner", Static)
        assert banner.has_class("-shown")
        assert "RuntimeError: connection refused" in str(banner.render())
        assert "last good data, from 02:15:00" in str(banner.render())
        assert app.query_one(HoldersView).model.total == 5 and app.query_one(HoldersView).dimmed
        console.fail = False
        app.action_refresh()
        await settle(app, pilot)
        assert not banner.has_class("-shown") and not app.query_one(HoldersView).dimmed


@sync
async def test_history_updates_in_place_and_keeps_the_cursor_on_its_row() -> None:
    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.query_one("#history", DataTable)
        table.focus()
        table.move_cursor(row=4)
        key = selected_key(table)
        snap = console.snapshot()
        runs = list(snap.runs)
        runs[0] = replace(runs[0], message="still billing")  # a cell changes
        console.set_snapshot(replace(snap, runs=tuple(runs)))
        app.action_refresh()
        await settle(app, pilot)
        assert selected_key(table) == key and table.cursor_row == 4
        newer = replace(runs[0], id=999, slot=FROZEN_NOW, started_at=FROZEN_NOW,
                        instance="web-9", job="report_export")  # fmt: skip
        slots = (replace(snap.slots[0], job="report_export", slot=FROZEN_NOW), *snap.slots)
        console.set_snapshot(replace(snap, runs=(newer, *runs), slots=slots))
        app.action_refresh()
        await settle(app, pilot)
        assert selected_key(table) == key and table.cursor_row == 5  # a row came in above


@sync
async def test_holders_view_at_10k_rows_paints_only_what_shows_and_keeps_the_cursor() -> None:
    holders = many_holders(10_000)
    console = SampleConsole(holders=holders)
    app = app_for(console)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        view = app.query_one(HoldersView)
        view.focus()
        await pilot.press("pagedown", "pagedown", "down")
        chosen = view.selected_holder
        assert chosen is not None
        view.painted = 0
        churned = [replace(h, key=str(int(h.key) + 5_000_000)) if i % 100 == 7 else h
                   for i, h in enumerate(holders)]  # fmt: skip
        console.set_snapshot(replace(console.snapshot(), holders=tuple(churned)))
        app.action_refresh()
        await settle(app, pilot)
        assert view.model.total == 10_000
        assert holder_key(view.selected_holder) == holder_key(chosen)
        assert view.painted <= 3 * view.size.height  # visible lines only, not 10,000 rows
        await pilot.press("g")
        assert view.model.group_by == "session" and view.selected_holder == chosen


@sync
async def test_a_refresh_that_changes_nothing_on_screen_repaints_no_holder_line() -> None:
    now = [FROZEN_NOW]
    holders = many_holders(2_000)
    console = SampleConsole(holders=holders)
    app = LockConsoleApp(console, clock=lambda: now[0], refresh=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        view = app.query_one(HoldersView)
        view.painted = 0
        app.action_refresh()  # the same holders, the same clock
        await settle(app, pilot)
        assert view.painted == 0
        first = view.model.rows[0]
        top = next(i for i, r in enumerate(view.model.rows) if r.holder is not None)
        changed = list(holders)
        changed[holders.index(view.model.rows[top].holder)] = replace(
            view.model.rows[top].holder, application_name="changed-app"
        )
        console.set_snapshot(replace(console.snapshot(), holders=tuple(changed)))
        app.action_refresh()  # one visible holder changed: the view repaints
        await settle(app, pilot)
        assert view.painted > 0 and view.model.rows[0] == first
        view.painted = 0
        now[0] = FROZEN_NOW + timedelta(hours=3)  # every age on screen changes
        app.action_refresh()
        await settle(app, pilot)
        assert view.painted > 0


@sync
async def test_ages_come_from_the_injected_clock() -> None:
    now = [FROZEN_NOW]
    app = LockConsoleApp(SampleConsole(), clock=lambda: now[0], refresh=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert "data 0s old" in str(app.query_one("#status", Static).render())
        now[0] = FROZEN_NOW + timedelta(minutes=3)
        app._show_status()
        assert "data 3m old" in str(app.query_one("#status", Static).render())


def test_no_color_is_honoured(monkeypatch: Any) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    assert LockConsoleApp(SampleConsole()).no_color
