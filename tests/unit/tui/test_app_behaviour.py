"""Console behaviour that needs no database: keymaps, refreshes that never stack or block the
first frame, worker failures, in-place updates, and the holders view at 10,000 rows.

These use the sample data set (SampleConsole) and stand-ins that are slow or fail on purpose;
database behaviour itself is tested against real servers in test_app_pilot.py.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import timedelta
from typing import Any

from textual.binding import Binding
from textual.strip import Strip
from textual.widgets import Static

from lockconsole.config.keymap import DEFAULT_KEYS, FIXED_KEYS
from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.model.views import Snapshot
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.palette import ActionsProvider
from lockconsole.tui.screens.dashboard.screen import DashboardScreen
from lockconsole.tui.screens.help import HelpScreen, help_rows
from lockconsole.tui.widgets.holders.rows import holder_key
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW, many_holders
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync, until


def app_for(console: Any, **kwargs: Any) -> LockConsoleApp:
    kwargs.setdefault("refresh", 3600)
    return LockConsoleApp(console, clock=lambda: FROZEN_NOW, **kwargs)


def select_stale(app: LockConsoleApp) -> None:
    view = app.query_one(HoldersView)
    view.focus()
    view._move(next(i for i, r in enumerate(view.model.rows) if r.holder and r.holder.stale))


@sync
async def test_keys_from_the_config_file_rebind_by_binding_id(tmp_path: Any) -> None:
    """[keys] read from a TOML file by load_config, on the real Console (a SQLite ledger)."""
    path = tmp_path / "lockconsole.toml"
    path.write_text(
        f'[databases.main]\nurl = "sqlite:///{tmp_path / "l.db"}"\n[jobs.j]\nstrategy = "lease"\n'
        '[keys]\nrelease = "k"\nhelp = "h"\n'
    )
    console = Console(load_config(str(path)))
    try:
        app = LockConsoleApp(console, refresh=3600)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            await pilot.press("question_mark")  # the old key does nothing now
            await pilot.pause()
            assert not isinstance(app.screen, HelpScreen)
            await pilot.press("h")
            await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help on h")
            await pilot.press("escape")
            rows = help_rows(app, read_only=False)
            assert ("k", "Force-release the selected lock holder (type its job name)") in rows
            assert ("h", "Show every key") in rows
    finally:
        console.close()


def test_the_console_bindings_are_the_ids_the_config_checks() -> None:
    """`[keys]` is checked against config.keymap without loading the UI: the same ids, every
    one of them (a binding the config does not know could be neither rebound nor guarded)."""
    bindings = [*LockConsoleApp.BINDINGS, *DashboardScreen.BINDINGS]
    bound = {b.id: b.key for b in bindings if isinstance(b, Binding)}
    assert bound == {**DEFAULT_KEYS, **FIXED_KEYS}


async def offered(app: LockConsoleApp) -> list[str]:
    """The palette's actions, as if opened over the screen on top now."""
    return [hit.text or "" async for hit in ActionsProvider(app.screen).discover()]


@sync
async def test_a_screen_on_top_sees_only_the_app_keys_not_the_dashboards() -> None:
    app = app_for(SampleConsole(), refresh=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        assert {"Trigger", "Group", "Help", "Quit"} <= set(await offered(app))
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
        await pilot.press("g", "t", "slash")  # the dashboard's keys: nothing happens
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen) and app.group_by == "job"
        actions = {b.binding.action for b in app.screen.active_bindings.values()}
        assert "close" in actions and not actions & {"group", "trigger", "filter", "app.help"}
        assert await offered(app) == ["Quit"]
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is app.dashboard, what="back on the dashboard")
        await pilot.press("g")
        await until(pilot, lambda: app.group_by == "session", what="g groups again")


class SlowConsole(SampleConsole):
    """A database that answers only when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.gate = threading.Event()

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
        self.calls += 1
        # held until the test opens the gate (it always does, in a finally); the bound only
        # keeps a broken test from leaving a thread behind for ever
        self.gate.wait(600)
        return super().snapshot()


@sync
async def test_a_slow_database_blocks_neither_the_first_frame_nor_keys_nor_stacks() -> None:
    console = SlowConsole()
    app = app_for(console, refresh=0.05)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await until(pilot, lambda: app.skipped_ticks >= 3, what="ticks while it hangs")
            # the status says so once the refresh has been out for a second
            status = app.query_one("#status", Static)
            await until(pilot, lambda: "refreshing" in str(status.render()), what="the notice")
            assert app.snapshot is None
            assert console.calls == 1
            shown = str(app.query_one("#status", Static).render())
            assert "loading" in shown and "refreshing" in shown, shown
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

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
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
        app.refresh_now()
        await settle(app, pilot, expect_failure=True)  # the app shows it (Worker.StateChanged)
        banner = app.query_one("#banner", Static)
        assert banner.has_class("-shown")
        assert "RuntimeError: connection refused" in str(banner.render())
        assert "last good data, from 2026-11-29 02:15:00 UTC" in str(banner.render())
        status = str(app.query_one("#status", Static).render())
        # the refresh failed: every database's data is old, none is "ok", none is "down"
        assert "● ok" not in status and "billing ◌" in status and "✖" not in status, status
        assert app.query_one(HoldersView).model.total == 5 and app.query_one(HoldersView).dimmed
        console.fail = False
        app.refresh_now()
        await settle(app, pilot)
        assert not banner.has_class("-shown") and not app.query_one(HoldersView).dimmed


@sync
async def test_history_updates_in_place_and_keeps_the_cursor_on_its_row() -> None:
    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        table = app.query_one("#history", PaneTable)
        table.focus()
        table.move_cursor(row=4)
        key = table.selected_key
        snap = console.snapshot()
        runs = list(snap.runs)
        runs[0] = replace(runs[0], message="still billing")  # a cell changes
        console.set_snapshot(replace(snap, runs=tuple(runs)))
        app.refresh_now()
        await settle(app, pilot)
        assert table.selected_key == key and table.cursor_row == 4
        newer = replace(
            runs[0],
            id=999,
            slot=FROZEN_NOW,
            started_at=FROZEN_NOW,
            instance="web-9",
            job="report_export",
        )
        slots = (replace(snap.slots[0], job="report_export", slot=FROZEN_NOW), *snap.slots)
        console.set_snapshot(replace(snap, runs=(newer, *runs), slots=slots))
        app.refresh_now()
        await settle(app, pilot)
        assert table.selected_key == key and table.cursor_row == 5  # a row came in above


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
        churned = [
            replace(h, key=str(int(h.key) + 5_000_000)) if i % 100 == 7 else h
            for i, h in enumerate(holders)
        ]
        console.set_snapshot(replace(console.snapshot(), holders=tuple(churned)))
        app.refresh_now()
        await settle(app, pilot)
        assert view.model.total == 10_000
        selected = view.selected_holder
        assert selected is not None and holder_key(selected) == holder_key(chosen)
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
        await first_data(app, pilot)
        view = app.query_one(HoldersView)

        def idle() -> bool:  # no line painted since the last look: the first paint is over
            painted, view.painted = view.painted, 0
            return painted == 0

        await until(pilot, idle, what="the first paint to finish")
        app.refresh_now()  # the same holders, the same clock
        await settle(app, pilot)
        assert view.painted == 0
        first = view.model.rows[0]
        top = next(i for i, r in enumerate(view.model.rows) if r.holder is not None)
        changed = list(holders)
        shown = view.model.rows[top].holder
        assert shown is not None
        changed[holders.index(shown)] = replace(shown, application_name="changed-app")
        console.set_snapshot(replace(console.snapshot(), holders=tuple(changed)))
        app.refresh_now()  # one visible holder changed: the view repaints
        await settle(app, pilot)
        assert view.painted > 0 and view.model.rows[0] == first
        view.painted = 0
        now[0] = FROZEN_NOW + timedelta(hours=3)  # every age on screen changes
        app.refresh_now()
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
        assert "data 3m00s old" in str(app.query_one("#status", Static).render())


def screen_segments(app: LockConsoleApp) -> list[tuple[str, Any]]:
    """Every (text, style) the terminal is sent for the whole screen, filters applied."""
    update = app.screen._compositor.render_update(full=True)
    lines = update.strips
    return [(seg.text, seg.style) for line in lines for seg in Strip.join(line)]


def is_grey(color: Any) -> bool:
    if color is None:
        return True
    r, g, b = color.get_truecolor()
    return max(r, g, b) - min(r, g, b) <= 8


async def rendered_states(monkeypatch: Any, no_color: bool) -> list[tuple[str, Any]]:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    console = FlakyConsole()
    app = app_for(console)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        assert app.monochrome is no_color
        console.fail = True  # a database down: the banner and the status line show it
        app.errors = {"billing": "connection refused"}
        app._show_status()
        await pilot.pause()
        return screen_segments(app)


@sync
async def test_no_color_drops_every_colour_and_keeps_states_readable(monkeypatch: Any) -> None:
    segments = await rendered_states(monkeypatch, no_color=True)
    text = "".join(t for t, _ in segments)
    colours = {c for _, style in segments if style for c in (style.color, style.bgcolor)}
    assert colours and all(is_grey(c) for c in colours), sorted(map(str, colours))
    # every state is told by text or a glyph, not by colour alone
    for marker in ("billing ✖ down", "reports ● ok", "! STALE", "DOUBLE RUN", "FAILED"):
        assert marker in text, marker
    # where colour was the only cue, reverse video marks the problem instead
    down = next(style for t, style in segments if "billing ✖ down" in t)
    assert down.reverse and down.bold, down
    double = [style for t, style in segments if t.strip().startswith("✖ DOUBLE RUN")]
    assert double and all(style.reverse for style in double)


@sync
async def test_with_colour_the_same_states_are_coloured(monkeypatch: Any) -> None:
    """The control for the test above: without NO_COLOR the same screen has colours."""
    segments = await rendered_states(monkeypatch, no_color=False)
    down = next(style for t, style in segments if "billing ✖ down" in t)
    assert not is_grey(down.color) and not down.reverse


class EarlyTickApp(LockConsoleApp):
    """A refresh tick placed before the dashboard's first frame: on a busy machine the
    interval's first tick can come before the panes are composed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.early: list[str] = []

    def on_mount(self) -> None:
        composed = bool(self.dashboard.query(PaneTable))
        self._tick()  # the tick, before anything else the app does on mount
        self.early.append("composed" if composed else "not composed")
        super().on_mount()


@sync
async def test_a_tick_before_the_dashboards_first_frame_waits_for_it() -> None:
    app = EarlyTickApp(SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await first_data(app, pilot)
        assert app.early == ["not composed"], "the tick came before the panes existed"
        assert app.query_one("#jobs", PaneTable).row_count > 0, "the jobs pane filled"
