"""The console's key rules, driven by Pilot on the sample data set (no database needed for
keys; database behaviour is tested against real servers elsewhere):

- `esc` closes every screen, `q` quits from every screen;
- Home/End and G move the cursor in every pane, as the help says;
- the history follows new rows while its cursor is on the newest row, and stays otherwise;
- a refused action says why (read-only, no selection, nothing to release);
- Enter and `i` describe the selected holder or job, in read-only mode too; release is one key
  away from the holder's screen;
- the palette finds an action by its words; `z` maximises; `>` then `S` sorts; the log never takes
  the holders' rows; an empty pane collapses to its title; the header names the config, the
  instance and each database with its masked URL.
"""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from textual.widgets import RichLog, Static

from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.palette import ActionsProvider
from lockconsole.tui.screens.confirm import ReleaseModal
from lockconsole.tui.screens.dashboard.screen import DashboardScreen
from lockconsole.tui.screens.describe import HolderScreen, JobScreen
from lockconsole.tui.widgets.holders.rows import layout
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW, make_run
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync

SIZE = (100, 30)


def app_for(console: Any | None = None, **kwargs: Any) -> LockConsoleApp:
    return LockConsoleApp(
        console or SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600, **kwargs
    )


def plain(app: LockConsoleApp, selector: str) -> str:
    """What a Static shows, as plain text (a grid or a table rendered by Rich)."""
    from rich.console import Console as RichConsole

    out = RichConsole(width=200, record=True, file=io.StringIO())
    out.print(app.screen.query_one(selector, Static).content)
    return out.export_text()


def notices(app: LockConsoleApp) -> list[str]:
    return [n.message for n in app._notifications]


def select_holder(app: LockConsoleApp, pick: Any) -> Holder:
    view = app.query_one(HoldersView)
    view.focus()
    index = next(i for i, r in enumerate(view.model.rows) if r.holder and pick(r.holder))
    view._move(index)
    holder = view.selected_holder
    assert holder is not None
    return holder


# (name, keys from the dashboard, the screen's class name, keys before q): a modal with a
# text field takes q as text while the field has the focus, so Tab goes to its buttons first
SCREENS = [
    ("help", ("question_mark",), "HelpScreen", ()),
    ("run detail", ("3", "enter"), "RunDetailScreen", ()),
    ("describe job", ("1", "enter"), "JobScreen", ()),
    ("describe holder", ("2", "i"), "HolderScreen", ()),
    ("timeline", ("1", "s"), "TimelineScreen", ()),
    ("duplicates", ("1", "d"), "DuplicatesScreen", ()),
    ("trigger question", ("1", "t"), "TriggerModal", ()),
    ("rerun a slot", ("3", "home", "t"), "TriggerModal", ()),
    ("audit", ("a",), "AuditScreen", ()),
    ("story", ("3", "w"), "StoryScreen", ()),
    ("alerts", ("exclamation_mark",), "AlertsScreen", ()),
    ("time travel question", ("b",), "TravelModal", ("tab",)),
    ("pause", ("1", "home", "P"), "PauseModal", ("tab",)),
    ("release", ("2", "home", "x"), "ReleaseModal", ("tab",)),
]


@pytest.mark.parametrize(
    ("keys", "screen", "before_q"),
    [(k, s, b) for _, k, s, b in SCREENS],
    ids=[n for n, *_ in SCREENS],
)
@sync
async def test_escape_closes_every_screen_and_q_quits_from_it(
    keys: tuple[str, ...], screen: str, before_q: tuple[str, ...]
) -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        await pilot.press(*keys)
        await settle(app, pilot)
        assert type(app.screen).__name__ == screen
        await pilot.press("escape")
        await settle(app, pilot)
        assert isinstance(app.screen, DashboardScreen), f"esc left {screen} open"
        await pilot.press(*keys)
        await settle(app, pilot)
        assert type(app.screen).__name__ == screen
        await pilot.press(*before_q, "q")
        await pilot.pause()
    assert app.return_code == 0, f"q on {screen} did not quit the console"
    assert not app.is_running


@sync
async def test_home_end_and_g_move_the_cursor_in_every_pane() -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        for pane in ("jobs", "history"):
            table = app.query_one(f"#{pane}", PaneTable)
            table.focus()
            await pilot.press("end")
            assert table.cursor_row == table.row_count - 1, pane
            await pilot.press("home")
            assert table.cursor_row == 0, pane
            await pilot.press("G")
            assert table.cursor_row == table.row_count - 1, pane
            await pilot.press("home")
            assert table.scroll_x == 0, "Home moves the cursor, it does not scroll sideways"
        view = app.query_one(HoldersView)
        view.focus()
        rows = view.model.rows
        await pilot.press("G")
        assert view.cursor == len(rows) - 1
        await pilot.press("home")
        assert view.cursor == 1, "the first holder (row 0 is its group's title)"
        await pilot.press("end")
        assert view.cursor == len(rows) - 1


def with_new_run(console: SampleConsole, minutes: int) -> str:
    """A run of a new, newer slot lands in the ledger; its history row key."""
    from lockconsole.console.snapshot.reports import slot_reports

    snap = console.snapshot()
    slot = FROZEN_NOW + timedelta(minutes=minutes)
    run = make_run(5000 + minutes, "invoice_reminders", slot, "web-2", "succeeded", 0, 1)
    runs = (run, *snap.runs)
    reports = slot_reports(
        list(console.config.jobs.values()),
        runs,
        now=slot + timedelta(minutes=1),
        lookback=timedelta(days=3),
        grace=timedelta(minutes=5),
    )
    console.set_snapshot(replace(snap, runs=runs, slots=tuple(reports)))
    from lockconsole.tui.pane_rows import run_key

    return run_key(run)


@sync
async def test_the_history_follows_new_rows_while_its_cursor_is_on_the_newest() -> None:
    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        table = app.query_one("#history", PaneTable)
        table.focus()
        await pilot.press("home")
        key = with_new_run(console, 10)
        app.refresh_now()
        await settle(app, pilot)
        assert table.get_row_index(key) == 0, "the newest slot is on top"
        assert table.selected_key == key, "the cursor on the newest row follows it"
        assert table.scroll_y == 0
        # not on the newest row: the cursor stays on its own row
        await pilot.press("down", "down")
        kept = table.selected_key
        with_new_run(console, 20)
        app.refresh_now()
        await settle(app, pilot)
        assert table.selected_key == kept


@sync
async def test_refusals_say_why() -> None:
    app = app_for(SampleConsole(read_only=True), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        await pilot.press("1", "t")
        await pilot.pause()
        assert any("trigger refused: the console is in --read-only mode" in n for n in notices(app))
        select_holder(app, lambda h: h.granted)
        await pilot.press("x")
        await pilot.pause()
        assert any("force-release refused" in n and "read-only" in n for n in notices(app))
        assert isinstance(app.screen, DashboardScreen)
        footer_keys = {b.binding.action for b in app.active_bindings.values() if b.binding.show}
        assert "release" not in footer_keys and "trigger" not in footer_keys

    app = app_for(SampleConsole())
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        select_holder(app, lambda h: not h.granted)  # a waiter holds nothing
        await pilot.press("x")
        await pilot.pause()
        assert any(
            n.startswith("Nothing to release: this session only waits") for n in notices(app)
        )
        assert isinstance(app.screen, DashboardScreen)
        await pilot.press("slash", *"no-such-holder", "enter")  # nothing selected
        await settle(app, pilot)
        await pilot.press("2", "x")
        await pilot.pause()
        assert any(
            n.startswith("Nothing to release: no lock holder is selected") for n in notices(app)
        )
        await pilot.press("i")
        await pilot.pause()
        assert any(n.startswith("No lock holder selected") for n in notices(app))


@sync
async def test_describe_a_holder_in_read_only_mode_then_release_from_it() -> None:
    app = app_for(SampleConsole(read_only=True), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        stale = select_holder(app, lambda h: bool(h.stale))
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, HolderScreen)
        text = plain(app, "#describe-fields")
        for part in (
            "! STALE",
            stale.stale,
            "query",
            stale.query,
            "client",
            "backend start",
            "state",
            "pid",
            str(stale.pid),
            "application",
        ):
            assert part and part in text, part
        await pilot.press("x")  # read-only: refused, said, the screen stays
        await pilot.pause()
        assert isinstance(app.screen, HolderScreen)
        assert any("force-release refused" in n for n in notices(app))

    console = SampleConsole()
    app = app_for(console)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        stale = select_holder(app, lambda h: bool(h.stale))
        await pilot.press("i", "x")
        await settle(app, pilot)
        assert isinstance(app.screen, ReleaseModal)
        await pilot.press(*stale.key, "enter")
        await settle(app, pilot)
        assert console.released == [stale]


@sync
async def test_describe_a_job_shows_config_next_firings_and_last_runs() -> None:
    app = app_for(SampleConsole(read_only=True), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        await pilot.press("1", "home", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, JobScreen)
        fields = plain(app, "#describe-fields")
        assert (
            "pg-session" in fields and "4242" in fields and "invoices(tenant_id, period)" in fields
        )
        firings = plain(app, "#describe-firings")
        assert firings.count("02:00:00 UTC") == 5 and "2026-11-30 02:00:00 UTC" in firings
        assert app.screen.query_one("#describe-runs", Static) is not None


@sync
async def test_every_time_shown_is_in_the_consoles_zone() -> None:
    """`[console] timezone` (Asia/Kolkata, UTC+05:30): the holders' notes, the describe screens
    and the release modal show their times in it, and the status line names it."""
    console = SampleConsole()
    settings = replace(console.config.console, timezone="Asia/Kolkata")
    console.config = replace(console.config, console=settings)
    app = app_for(console)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        assert "Asia/Kolkata" in plain(app, "#status")
        lease = next(
            r
            for r in app.query_one(HoldersView).model.rows
            if r.flag == "held" and r.holder is not None and r.holder.kind == "lease"
        )
        assert "lease until 07:50:00" in lease.cells[6], lease.cells  # 02:20 UTC

        select_holder(app, lambda h: h.job == "nightly_billing" and h.granted)
        await pilot.press("i")
        await settle(app, pilot)
        assert isinstance(app.screen, HolderScreen)
        fields = plain(app, "#describe-fields")  # held since 02:00:00 UTC
        assert "2026-11-29 07:30:00 Asia/Kolkata" in fields and "UTC" not in fields, fields
        await pilot.press("x")
        await settle(app, pilot)
        assert isinstance(app.screen, ReleaseModal)
        details = plain(app, "#details Static")
        assert "2026-11-29 07:30:00 Asia/Kolkata" in details and "UTC" not in details, details
        await pilot.press("escape")
        await settle(app, pilot)

        await pilot.press("1", "home", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, JobScreen)
        firings = plain(app, "#describe-firings")  # cron 0 2 * * * in UTC
        assert firings.count("07:30:00 Asia/Kolkata") == 5 and "UTC" not in firings, firings
        runs = plain(app, "#describe-runs")
        assert "07:30:00 Asia/Kolkata" in runs and "UTC" not in runs, runs


@sync
async def test_palette_zoom_sort_log_overlay_collapse_and_header() -> None:
    console = SampleConsole()
    console.set_snapshot(replace(console.snapshot(), runs=(), slots=()))  # an empty history
    app = app_for(console)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_data(app, pilot)
        provider = ActionsProvider(app.screen)
        await provider.startup()
        found = [str(hit.help) async for hit in provider.search("alert")]
        assert "log" in found, found

        history = app.query_one("#history")
        holders = app.query_one(HoldersView)
        assert history.outer_size.height == 1, "an empty history collapses to its title"
        rows_before = holders.outer_size.height
        assert rows_before >= len(holders.model.rows) + 2, "the holders get the room"
        await pilot.press("o")
        await pilot.pause()
        assert app.query_one("#log", RichLog).display
        assert holders.outer_size.height == rows_before, "the log is an overlay"
        await pilot.press("escape", "2", "z")
        await pilot.pause()
        assert app.query_one("#jobs").outer_size.height == 1 and history.outer_size.height == 1
        await pilot.press("z")
        await pilot.pause()
        assert app.query_one("#jobs").outer_size.height > 1

        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign", "S")
        await settle(app, pilot)
        assert app.holder_sort == ("PID", False)
        assert "PID ▲" in holders.columns.header
        group: list[int] = []  # within each group the pids ascend
        for row in holders.model.rows:
            if row.flag == "header":
                group = []
            elif row.cells[3].isdigit():
                group.append(int(row.cells[3]))
                assert group == sorted(group), group

        header = str(app.query_one("#header", Static).render())
        assert "sample.toml" in header and "instance" in header
        assert "billing:***@db.internal" in header or "db.internal" in header
        assert "${BILLING_PASSWORD}" not in header


def test_redis_holders_say_redis_and_ttl() -> None:
    holder = Holder(
        database="cache",
        kind="redis",
        key="job-lock:default:nightly",
        key_kind="name",
        granted=True,
        source="redis",
        job="nightly",
        locked_by="web-1",
        lock_until=FROZEN_NOW + timedelta(minutes=5),
        value="ADDED:2026|web-1",
    )
    row = next(r for r in layout([holder]).rows if r.holder is not None)
    assert row.cells[3] == "redis"
    assert "TTL until 02:20:00" in row.cells[6] and "lease" not in row.cells[6]


@sync
async def test_csv_export_asks_before_overwriting(tmp_path: Any) -> None:
    from textual.widgets import Input

    from lockconsole.tui.screens.confirm import ConfirmModal

    target = tmp_path / "dupes.csv"
    target.write_text("keep me\n")
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        await pilot.press("1", "home", "d")
        await settle(app, pilot)
        dupes = app.screen

        async def export() -> None:
            await pilot.press("e")
            await pilot.pause()
            box = dupes.query_one("#export-path", Input)
            box.value = str(target)
            await pilot.press("enter")
            await settle(app, pilot)

        await export()
        assert isinstance(app.screen, ConfirmModal), "an existing file: asked first"
        await pilot.press("n")
        await settle(app, pilot)
        assert target.read_text() == "keep me\n"
        assert any("Not exported" in n for n in notices(app))
        await export()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("y")
        await settle(app, pilot)
        assert target.read_text().startswith("id,tenant_id,period"), "overwritten once confirmed"
        await export()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("escape")  # esc: not overwritten, back on the duplicates screen
        await settle(app, pilot)
        assert app.screen is dupes
        await export()
        assert isinstance(app.screen, ConfirmModal)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0 and not app.is_running, "q on the overwrite question quits"


@sync
async def test_a_read_only_console_leaves_the_next_console_its_keys() -> None:
    """Hiding trigger and release from one read-only dashboard's footer touches no other."""
    async with app_for(SampleConsole(read_only=True), read_only=True).run_test(size=SIZE):
        pass
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        shown = {b.binding.action for b in app.active_bindings.values() if b.binding.show}
        assert {"trigger", "release"} <= shown, shown


@sync
async def test_a_narrow_footer_keeps_help_and_quit_in_view() -> None:
    """At 80 columns the footer is cut at the right: `? Help` and `q Quit` come first."""
    from textual.widgets._footer import FooterKey

    app = app_for(SampleConsole())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        shown = {
            key.description: key.region
            for key in app.screen.query(FooterKey)
            if key.region.width > 0
        }
        for label in ("Help", "Quit"):
            assert label in shown, sorted(shown)
            assert shown[label].right <= 80, (label, shown[label])
        await pilot.press("question_mark")
        await pilot.pause()
        assert app.screen is not app.screen_stack[0]  # ? opened the help
