"""The story of a slot and time travel, driven by Pilot on the sample data set (its story of
nightly_billing 2026-11-27 02:00 UTC: a double run with a foreign psql holder, an audited
release, 120 duplicate keys); the same on a real PostgreSQL is test_story_postgres.py.

- `w` on a history row, Enter on an alert of a slot (`!`), `w` on the timeline: the story;
- its lines in order, each attempt's end with its exit code, the foreign holder's seen-interval,
  the audit; then the alerts, the duplicate keys, the verdict; Enter opens a run's output tail;
- a part that could not be read says unknown, never empty; a story that cannot be read says so;
- the story is read in a worker: the screen is up and keys work while the database is slow;
- `b` on a line sets the dashboard's clock back: THE PAST banner and status, the journal's
  holders and the history as of then, the refresh does not overwrite it, mutations are
  refused; `N` comes back to now and refreshes; the dashboard's `b` asks for a moment;
- the new keys are in the help, the footer offers `N` in the past, `[keys]` rebinds them.
"""

from __future__ import annotations

import io
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from textual.widgets import DataTable, Input, Static

from lockconsole.model.views import SlotStory
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.pane_rows import run_key
from lockconsole.tui.past import parse_moment
from lockconsole.tui.screens.alerts import AlertsScreen
from lockconsole.tui.screens.dashboard.screen import DashboardScreen
from lockconsole.tui.screens.help import help_rows
from lockconsole.tui.screens.run_detail import RunDetailScreen
from lockconsole.tui.screens.story import StoryScreen, story_lines
from lockconsole.tui.screens.travel import TravelModal
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync, until

SIZE = (120, 40)
NIGHT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)  # the unguarded night


def app_for(console: Any | None = None, **kwargs: Any) -> LockConsoleApp:
    return LockConsoleApp(
        console or SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600, **kwargs
    )


def text_of(app: LockConsoleApp, selector: str) -> str:
    """What a Static of the screen on top shows, as plain text."""
    from rich.console import Console as RichConsole

    out = RichConsole(width=400, record=True, file=io.StringIO())
    out.print(app.screen.query_one(selector, Static).render())
    return " ".join(out.export_text().split())


def screen_text(app: LockConsoleApp) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def notices(app: LockConsoleApp) -> list[str]:
    return [n.message for n in app._notifications]


def table_rows(app: LockConsoleApp) -> list[list[str]]:
    table = app.screen.query_one("#story-events", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def story_on_screen(app: LockConsoleApp, pilot: Any) -> StoryScreen:
    await until(pilot, lambda: isinstance(app.screen, StoryScreen), what="the story screen")
    screen = app.screen
    assert isinstance(screen, StoryScreen)
    await until(pilot, lambda: screen.story is not None, what="the story read")
    await settle(app, pilot)
    return screen


def select_history_run(app: LockConsoleApp, run_id: int) -> None:
    snap = app.snapshot
    assert snap is not None
    run = next(r for r in snap.runs if r.id == run_id)
    table = app.query_one("#history", PaneTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(run_key(run)))


def move_to_line(app: LockConsoleApp, key: str) -> None:
    table = app.screen.query_one("#story-events", DataTable)
    table.move_cursor(row=table.get_row_index(key))


@sync
async def test_w_on_a_history_row_tells_that_slot_in_order_ending_with_its_verdict() -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        select_history_run(app, 802)
        await pilot.press("w")
        screen = await story_on_screen(app, pilot)
        assert (screen.job, screen.slot) == ("nightly_billing", NIGHT)
        rows = table_rows(app)
        whats = [r[3] for r in rows]
        assert [r[0] for r in rows] == sorted(r[0] for r in rows), "oldest first"
        assert rows[0][1:3] == ["foreign", "psql pid 30412 from 10.0.9.4"]
        assert "held 4242 (seen 01:59:58–02:00:05) · outside lockconsole" in whats[0]
        for run_id in (801, 802, 803):
            assert f"run {run_id}: acquired, started the job" in whats
            assert f"run {run_id}: succeeded, exit 0" in whats
        release = next(r for r in rows if r[1] == "audit")
        assert release[0] == "02:00:06.000" and release[3].startswith("release pg advisory")
        whole = screen.lines["audit:billing:0"].what  # the cell is cut, the line below is not
        assert whole.endswith(": released (pid 30412 terminated in 9 ms)")
        move_to_line(app, "audit:billing:0")
        await pilot.pause()
        assert whole in text_of(app, "#story-detail")
        assert any(r[3] == "gone from 4242" and r[0] == "02:00:07.000" for r in rows)
        end = text_of(app, "#story-end") + " " + text_of(app, "#story-verdict")
        assert end.index("Alerts: 2") < end.index("Duplicate keys") < end.index("Verdict")
        assert "ran on 3 instances: web-1, web-2, web-3" in end
        assert "120 keys (240 surplus rows) carry its run ids: (1001, 2026-11) ×3" in end
        assert "Verdict: double run: 3 executions on web-1, web-2, web-3" in end
        assert "psql pid 30412" in end.split("Verdict")[1], "the verdict says why"
        assert "slot 2026-11-27 02:00:00 · times UTC" in text_of(app, "#story-title")
        # Enter on an attempt: the run with the output tail it left
        move_to_line(app, "run:803:end")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), what="run detail")
        await settle(app, pilot)
        assert "billed 120 tenants for 2026-11" in screen_text(app)
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dashboard")


@sync
async def test_an_alert_of_a_slot_and_the_timeline_open_the_story_in_one_key() -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        await pilot.press("exclamation_mark")
        await until(pilot, lambda: isinstance(app.screen, AlertsScreen), what="the alerts")
        alerts = app.screen
        assert isinstance(alerts, AlertsScreen)
        # an alert without a slot (the stale holder) has no story: it says so
        table = alerts.query_one("#alerts", DataTable)
        stale = next(i for i, a in enumerate(alerts.alerts) if not a.slot)
        table.move_cursor(row=stale)
        await pilot.press("w")
        await pilot.pause()
        assert any("has no story" in n for n in notices(app))
        assert isinstance(app.screen, AlertsScreen)
        double = next(i for i, a in enumerate(alerts.alerts) if a.kind == "double_run")
        table.move_cursor(row=double)
        await pilot.press("enter")
        screen = await story_on_screen(app, pilot)
        assert (screen.job, screen.slot) == ("nightly_billing", NIGHT)
        await pilot.press("escape", "escape")
        await until(pilot, lambda: isinstance(app.screen, DashboardScreen), what="dashboard")
        # the timeline: its selected slot (the newest, then two older: the 27th)
        await pilot.press("1", "home", "s", "down", "down", "w")
        screen = await story_on_screen(app, pilot)
        assert (screen.job, screen.slot) == ("nightly_billing", NIGHT)


class StoryConsole(SampleConsole):
    """The sample, with a story changed by the test (or one that cannot be read at all)."""

    def __init__(self, change: Any = None, fail: str | None = None) -> None:
        super().__init__()
        self.change = change
        self.fail = fail
        self.threads: list[str] = []
        self.gate = threading.Event()
        self.gate.set()

    def story(self, job_name: str, slot: datetime) -> SlotStory:
        self.threads.append(threading.current_thread().name)
        self.gate.wait(600)  # held while the test says so (it always opens it)
        if self.fail:
            raise RuntimeError(self.fail)
        story = super().story(job_name, slot)
        return self.change(story) if self.change else story


@sync
async def test_parts_that_could_not_be_read_are_unknown_never_empty() -> None:
    def unread(story: SlotStory) -> SlotStory:
        return replace(
            story,
            holders=(),
            duplicates=(),
            unknown=(
                ("holder journal", "permission denied for table lockconsole_holder_journal"),
                ("idempotency table", "relation invoices does not exist"),
                ("output of run 801", "server closed the connection"),
            ),
        )

    app = app_for(StoryConsole(unread))
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        app.dashboard.open_story("nightly_billing", NIGHT)
        await story_on_screen(app, pilot)
        rows = table_rows(app)
        assert rows[0][:3] == ["?", "⚠ unknown", "holder journal"]
        assert rows[0][3] == "unknown: permission denied for table lockconsole_holder_journal"
        end = text_of(app, "#story-end")
        assert "Duplicate keys: unknown: idempotency table: relation invoices does not exist" in end
        assert "none found" not in end
        assert "Unknown: holder journal (permission denied" in end
        assert "told without the parts that could not be read" in text_of(app, "#story-verdict")
        move_to_line(app, "run:801:end")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), what="run detail")
        await settle(app, pilot)
        output = text_of(app, "#output")
        assert "unknown: output of run 801: server closed the connection" in output
        assert "no output kept" not in output


@sync
async def test_a_story_that_cannot_be_read_says_so() -> None:
    app = app_for(StoryConsole(fail="connection refused: ledger billing"))
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        app.dashboard.open_story("nightly_billing", NIGHT)
        await until(pilot, lambda: isinstance(app.screen, StoryScreen), what="the story screen")
        await settle(app, pilot)
        end = text_of(app, "#story-end")
        assert "The story is unknown: it could not be read: connection refused" in end


@sync
async def test_the_story_is_read_in_a_worker_and_keys_work_meanwhile() -> None:
    console = StoryConsole()
    console.gate.clear()
    app = app_for(console)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await first_data(app, pilot)
            app.dashboard.open_story("nightly_billing", NIGHT)
            await until(pilot, lambda: console.threads, what="the story asked")
            assert isinstance(app.screen, StoryScreen)
            assert "reading the story…" in text_of(app, "#story-end")
            await pilot.press("escape")  # keys work while the database is slow
            await until(pilot, lambda: app.screen is app.dashboard, what="back on the dashboard")
            console.gate.set()  # the story of a screen gone lands nowhere, and breaks nothing
            await settle(app, pilot)
            await pilot.press("3", "w")
            await story_on_screen(app, pilot)
            assert all(name != threading.main_thread().name for name in console.threads)
    finally:
        console.gate.set()


class CountingConsole(SampleConsole):
    """The sample, counting its snapshots (the refresh) and its past reads."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots = 0
        self.asked: list[tuple[str, object]] = []

    def snapshot(self, *, duplicates: bool | None = None) -> Any:
        self.snapshots += 1
        return super().snapshot()

    def holders_at(self, at: datetime, **kw: Any) -> Any:
        self.asked.append(("holders_at", at))
        return super().holders_at(at, **kw)

    def history(self, job: str | None = None, **kw: Any) -> Any:
        self.asked.append(("history", kw.get("where")))
        return super().history(job, **kw)


@sync
async def test_b_on_a_story_line_shows_the_past_until_N_brings_back_now() -> None:
    console = CountingConsole()
    app = app_for(console)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        app.dashboard.open_story("nightly_billing", NIGHT)
        await story_on_screen(app, pilot)
        move_to_line(app, "audit:billing:0")  # the release, 02:00:06
        moment = NIGHT + timedelta(seconds=6)
        await pilot.press("b")
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(app, pilot)
        assert isinstance(app.screen, DashboardScreen)
        assert app.past is not None and app.past.moment == moment
        assert ("holders_at", moment) in console.asked
        # clearly the past: a banner and the status line, in words, not by colour alone
        assert app.dashboard.query_one("#past").has_class("-shown")
        banner = text_of(app, "#past")
        assert "◀ THE PAST: 2026-11-27 02:00:06.000 UTC" in banner and "N: back to now" in banner
        assert text_of(app, "#status").startswith("PAST 2026-11-27 02:00:06 UTC")
        assert "not refreshing" in text_of(app, "#status")
        # the holders the journal saw then: the psql session, surely (seen 01:59:58–02:00:05
        # and gone by 02:00:07: at 02:00:06 it may have held it still)
        view = app.query_one(HoldersView)
        (holder,) = [r.holder for r in view.model.rows if r.holder is not None]
        assert (holder.pid, holder.application_name, holder.key) == (30412, "psql", "4242")
        assert "MAYBE held then" in (holder.hidden or "")
        # the history as of then: the three runs of the night, each still running
        assert app.snapshot is not None
        assert {(r.id, r.outcome, r.finished_at) for r in app.snapshot.runs} == {
            (801, "acquired", None),
            (802, "acquired", None),
            (803, "acquired", None),
        }
        shown = " ".join(screen_text(app).split())
        assert "nightly_billing ✖ DOUBLE RUN scheduled web-3 acquired running" in shown
        # the refresh does not overwrite the past
        before = console.snapshots
        app.refresh_now()
        await pilot.press("r")
        await settle(app, pilot)
        assert console.snapshots == before and app.past is not None
        assert app.snapshot.taken_at == moment
        # no mutation of the past: a journaled holder is not a session that can be ended now
        await pilot.press("1", "home", "t")
        await pilot.pause()
        assert any("trigger refused: the dashboard shows the past" in n for n in notices(app))
        await pilot.press("2", "x")
        await pilot.pause()
        assert any("force-release refused: the dashboard shows the past" in n for n in notices(app))
        await pilot.press("1", "P")
        await pilot.pause()
        assert any("pause refused: the dashboard shows the past" in n for n in notices(app))
        assert isinstance(app.screen, DashboardScreen)
        # the footer offers the way back
        assert "N Back to now" in " ".join(screen_text(app).splitlines()[-1].split())
        await pilot.press("N")
        await until(pilot, lambda: app.past is None, what="back to now")
        await settle(app, pilot)
        assert app.snapshot is not None and app.snapshot.taken_at == FROZEN_NOW
        assert console.snapshots == before + 1, "back to now refreshes"
        assert not app.dashboard.query_one("#past").has_class("-shown")
        assert "PAST" not in text_of(app, "#status")
        assert "Back to now" not in screen_text(app).splitlines()[-1]


@sync
async def test_b_on_the_dashboard_asks_for_a_moment_in_the_consoles_zone() -> None:
    console = CountingConsole()
    app = app_for(console)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        select_history_run(app, 801)
        await pilot.press("b")
        await until(pilot, lambda: isinstance(app.screen, TravelModal), what="the question")
        field = app.screen.query_one("#moment", Input)
        assert field.value == "2026-11-27 02:00:00.000", "the selected slot, filled in"
        await pilot.press("ctrl+a", "ctrl+k")  # the field emptied
        await pilot.press(*"nonsense", "enter")
        await pilot.pause()
        assert any("not a time" in n for n in notices(app))
        field.value = "02:00:03"
        await pilot.press("enter")
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(app, pilot)
        assert app.past is not None and app.past.moment == NIGHT + timedelta(seconds=3)
        (holder,) = app.snapshot.holders if app.snapshot else ()
        assert holder.pid == 30412 and "MAYBE" not in (holder.hidden or "")
        await pilot.press("N")
        await until(pilot, lambda: app.past is None, what="back to now")


def test_a_typed_moment_is_in_the_consoles_zone_unless_it_names_its_own() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    day = datetime(2026, 11, 27).date()
    assert parse_moment("03:00:03", berlin, day) == NIGHT + timedelta(seconds=3)
    assert parse_moment("2026-11-27 03:00:03.5", berlin, day) == NIGHT + timedelta(seconds=3.5)
    assert parse_moment("2026-11-27T02:00:03Z", berlin, day) == NIGHT + timedelta(seconds=3)
    assert parse_moment("2026-11-27T04:00:03+02:00", None, day) == NIGHT + timedelta(seconds=3)
    with pytest.raises(ValueError, match="not a time"):
        parse_moment("yesterday", berlin, day)


def test_the_story_tells_holder_times_in_the_consoles_zone() -> None:
    story = SampleConsole().story("nightly_billing", NIGHT)
    lines = story_lines(story, ZoneInfo("Europe/Berlin"))
    held = next(line for line in lines if line.key == "holder:1")
    assert "seen 02:59:58–03:00:05" in held.what


@sync
async def test_the_new_keys_are_in_the_help_and_rebound_by_the_keymap() -> None:
    keymap = {"story": "y", "travel": "ctrl+b", "now": "n"}
    app = app_for(keymap=keymap)
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        rows = dict(help_rows(app, read_only=True))
        assert rows["y"].startswith("Tell the story of the selected slot")
        assert rows["^b"].startswith("Set the dashboard's clock back")
        assert rows["n"].startswith("Back to now")
        assert rows["!"].startswith("List the alerts")
        select_history_run(app, 801)
        await pilot.press("y")
        await story_on_screen(app, pilot)
        await pilot.press("b")  # the story screen's own key
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(app, pilot)
        assert "n: back to now" in text_of(app, "#past")
        await pilot.press("n")
        await until(pilot, lambda: app.past is None, what="back to now")
