"""The dashboard screen: jobs, lock holders and run history, with its own keys and actions.

    DashboardScreen()   the app's default screen; show_data(rows) / show_status() repaint it

Its BINDINGS are screen-scoped: a screen pushed on top (a modal, duplicates, ...) does not see
them. The refresh and its state, the workers and quitting are the app's (LockConsoleApp).
The panes share the height by what they hold (`widgets/pane_heights.py`); the log is an
overlay that never takes the holders' rows. What to do with a selection (describe, trigger,
release, dupes, timeline) lives in `actions.py`; a refused action says why.
The story of a slot, the alerts and time travel are `story_actions.py`; while the
clock is set back, a banner and the status line say THE PAST, and every mutation is refused.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, cast

from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Input, RichLog, Static

from lockconsole.model.jobs import Run
from lockconsole.text.times import zone_label
from lockconsole.tui import nocolor
from lockconsole.tui.bindings import MUTATING, dashboard_bindings
from lockconsole.tui.carry_over import job_names
from lockconsole.tui.freshness import Freshness, freshness_of, pane_sources
from lockconsole.tui.older_runs import OlderRuns, parse_filter
from lockconsole.tui.pane_models import Panes, PaneView, build_panes
from lockconsole.tui.pane_rows import HISTORY_COLUMNS, JOB_COLUMNS, Staleness, job_cells
from lockconsole.tui.screens.dashboard.actions import SelectionActions
from lockconsole.tui.screens.dashboard.story_actions import StoryActions
from lockconsole.tui.widgets.header import header_text
from lockconsole.tui.widgets.holders.rows import COLUMNS, FIRST_DESCENDING
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_heights import share
from lockconsole.tui.widgets.pane_table import PaneTable
from lockconsole.tui.widgets.status_line import banner_text, status_text
from lockconsole.tui.widgets.table_model import Cell
from lockconsole.tui.widgets.tables import next_sort, sort_note

if TYPE_CHECKING:
    from datetime import datetime

    from lockconsole.tui.app import LockConsoleApp

PANES = ("jobs", "holders", "history")


class DashboardScreen(Screen[None]):
    """Three panes over the app's latest Snapshot, a header, a status line, a banner, a log."""

    BINDINGS = dashboard_bindings()

    def __init__(self) -> None:
        super().__init__()
        self.runs_of: Mapping[str, tuple[Run, list[Run]]] = {}  # history row key -> its run
        self.panes: Panes | None = None  # what the panes show, laid out by the refresh worker
        self._stale = Staleness()  # the databases down, as of the last second's repaint
        self._shown_status: object = None
        self._shown_banner: object = None
        self._ages_second: int | None = None  # the clock's second the holders' ages were for
        self.maximised: str | None = None
        self.selection = SelectionActions(self)
        self.stories = StoryActions(self)
        self.older = OlderRuns()  # history past the snapshot's page, read on "m"
        self.titles = {"jobs": "1 Jobs", "holders": "2 Lock holders", "history": "3 Run history"}

    @property
    def host(self) -> LockConsoleApp:
        """The app, with its refresh state and workers."""
        return cast("LockConsoleApp", self.app)

    # --- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="header", markup=False)
        yield Static(id="status")
        yield Static(id="banner")
        yield Static(id="past")  # THE PAST: shown while the clock is set back (time travel)
        with Vertical(id="panes"):
            yield PaneTable(JOB_COLUMNS, fixed=1, id="jobs")
            yield HoldersView(id="holders", clock=self.host.clock)
            yield PaneTable(HISTORY_COLUMNS, fixed=2, id="history")
        yield Input(id="filter", placeholder="filter: text, job: instance: outcome: (Esc clears)")
        yield RichLog(id="log", max_lines=2000, wrap=True, markup=False, highlight=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.host.read_only:  # refused with a notice, but not offered in the footer
            # new lists: this screen's map shares them with the class's (a shallow copy)
            table = self._bindings.key_to_bindings
            for key, bindings in list(table.items()):
                table[key] = [
                    replace(b, show=False) if b.action in MUTATING else b for b in bindings
                ]
        self.query_one("#jobs", PaneTable).border_title = "1 Jobs"
        self.query_one("#jobs", PaneTable).live = self._job_now
        self.query_one("#history", PaneTable).border_title = "3 Run history"
        self.query_one(HoldersView).border_title = "2 Lock holders"
        self.query_one(HoldersView).set_class(self.host.monochrome, "-monochrome")
        self.query_one("#log", RichLog).border_title = "Log: output and alerts (o hides)"
        self.query_one("#jobs").focus()
        self.query_one("#header", Static).update(
            header_text(self.host.facade.config, self.host.instance_name())
        )
        self.show_status()
        self.host.start_refreshing()

    def on_resize(self, event: events.Resize) -> None:
        self.call_after_refresh(self.share_heights)

    def status_overwritten(self) -> None:
        """The status line was painted by someone else (the past's): paint the live one
        again at the next chance, even if its text did not change."""
        self._shown_status = None

    def share_heights(self) -> None:
        """Give each pane the height its rows need (an empty one collapses to its title)."""
        panes = self.query_one("#panes")
        total = panes.size.height
        if total <= 0:
            return
        counts = {
            "jobs": self.query_one("#jobs", PaneTable).row_count,
            "holders": len(self.query_one(HoldersView).model.rows),
            "history": self.query_one("#history", PaneTable).row_count,
        }
        for name, height in share(total, counts, self.maximised).items():
            widget = self.query_one(f"#{name}")
            if widget.styles.height is None or widget.styles.height.value != height:
                widget.styles.height = height
            widget.set_class(height <= 1, "-collapsed")

    # --- what is allowed ---------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # every key works; a mutation in --read-only mode is refused with a notice
        if action == "now":  # offered (in the footer too) only while the past is shown
            return self.host.past is not None
        return True

    def refused(self, what: str) -> bool:
        if self.stories.refused_in_the_past(what):
            return True
        if self.host.read_only:
            self.notify(f"{what} refused: the console is in --read-only mode", severity="warning")
            return True
        return False

    # --- painting ----------------------------------------------------------------------

    def pane_view(self) -> PaneView:
        """What the panes' rows depend on now, besides the snapshot: the refresh worker lays
        them out for it, and a change meanwhile (a filter typed, a sort) is laid out here."""
        host = self.host
        return PaneView(
            group_by=host.group_by,
            text_filter=host.text_filter,
            holder_sort=host.holder_sort,
            jobs_sort=self._table("jobs").sort_by,
            history_sort=self._table("history").sort_by,
            zone=host.zone,
            configured=frozenset(job_names(host.facade.config)),
            monochrome=host.monochrome,
            stale=self._stale,
        )

    def older_runs(self) -> list[Run]:
        """The older runs ("m") read for the filter's words (thread-safe)."""
        return self.older.runs(parse_filter(self.host.text_filter))

    def show_data(self, panes: Panes | None = None) -> None:
        """Repaint the panes from the app's snapshot (panes: laid out by the refresh worker;
        laid out here when they are missing or were laid out for another filter or sort)."""
        host = self.host
        snap = host.snapshot
        if snap is None:
            return
        view = self.pane_view()
        older = self.older_runs()
        if panes is None or panes.view != view or panes.older != len(older):
            panes = build_panes(snap, view, host.clock(), older=older, previous=self.panes)
        self.panes = panes
        self.runs_of = panes.runs_of
        holders = self.query_one(HoldersView)
        holders.show(panes.holders)
        model = holders.model
        shown = model.shown
        counts = f"{model.total} holders" if shown == model.total else f"{shown} of {model.total}"
        extra = [f"{model.waiting} waiting"] * bool(model.waiting)
        extra += [f"{model.stale} stale"] * bool(model.stale)
        extra += [f"{model.unmapped} unmapped"] * bool(model.unmapped)
        title = f"2 Lock holders · {counts}" + "".join(f" · {e}" for e in extra)
        self.titles["holders"] = title + sort_note(model.sort)
        holders.show_notes(snap.notes, host.group_by)
        history = self._table("history")
        history.show(panes.history, follow_first=history.sort_by is None)
        self._table("jobs").show(panes.jobs)
        bad = sum(a.kind in ("double_run", "missed", "lock_lost", "failed") for a in snap.alerts)
        problems = f" · {bad} problems" if bad else ""
        self.titles["history"] = "3 Run history" + problems + sort_note(history.sorted_by)
        self.show_ages()
        self.share_heights()

    def _job_now(self, name: str) -> Sequence[Cell] | None:
        """Job `name`'s row now: the jobs pane asks for the rows it shows, each second."""
        host = self.host
        snap = host.snapshot
        if snap is None:
            return None
        cells = job_cells(snap, name, host.clock(), zone=host.zone, stale=self._stale)
        if cells is not None and host.monochrome:
            return [nocolor.without_colour(c) for c in cells]
        return cells

    def show_ages(self) -> None:
        """Repaint what counts on with the clock: the jobs pane's visible rows (LAST, NEXT,
        unknown's age) and the holders' ages; the status line is show_status()."""
        host = self.host
        snap = host.snapshot
        if snap is None:
            return
        fresh = self.freshness()
        self._stale = Staleness(
            {name: fresh.good_since(name) for name in host.errors}, fresh.ledger_of
        )
        now = fresh.now
        jobs = self._table("jobs")
        jobs.tick()
        self.titles["jobs"] = "1 Jobs" + sort_note(jobs.sorted_by)
        for pane, sources in pane_sources(fresh, host.database_names()).items():
            _title(self.query_one(f"#{pane}"), self.titles[pane] + fresh.age_note(sources))
        second = int(now.timestamp())
        if second != self._ages_second:  # the holders' ages read another second: repaint
            self._ages_second = second
            self.query_one(HoldersView).refresh()

    def freshness(self) -> Freshness:
        """How old each database's data on screen is: the status line, the banner and the
        pane titles all read it from here."""
        host = self.host
        return freshness_of(
            host.clock(),
            host.last_good,
            host.errors,
            refresh=host.refresh_interval,
            took=host.last_took,
            config=host.facade.config,
        )

    def show_status(self) -> None:
        """Repaint the status line and the error banner from the app's refresh state."""
        host = self.host
        if self.stories.show_past():  # the past's status and banner, not the live data's
            return
        fresh = self.freshness()
        busy = None
        if host.refresh_started is not None:
            busy = time.monotonic() - host.refresh_started
        snap = host.snapshot
        alerts = snap.alerts if snap else ()
        text = status_text(
            host.database_names(),
            fresh,
            loaded=snap is not None,
            refresh=host.refresh_interval,
            paused=host.paused,
            read_only=host.read_only,
            busy=busy,
            alerts=len(alerts),
            old_alerts=sum(map(fresh.alert_is_old, alerts)),
            zone=zone_label(host.zone),
        )
        if host.monochrome:
            text = nocolor.without_colour(text)
        status = self.query_one("#status", Static)
        if text != self._shown_status:
            self._shown_status = text
            status.update(text, layout=False)  # one line, always: no layout pass
        banner = self.query_one("#banner", Static)
        if host.errors:
            shown = banner_text(host.errors, fresh, host.zone)
            shown = nocolor.without_colour(shown) if host.monochrome else shown
            if shown != self._shown_banner:  # its age ticks: repaint only what changed
                self._shown_banner = shown
                banner.update(shown)
        degraded = bool(host.errors)
        if banner.has_class("-shown") != degraded:  # the last good data stays, dimmed
            banner.set_class(degraded, "-shown")
            self.query_one("#panes").set_class(degraded, "-degraded")
            self.query_one(HoldersView).dimmed = degraded
            self.call_after_refresh(self.share_heights)

    # --- navigation and view -----------------------------------------------------------

    def focused_pane(self) -> str:
        focused = self.focused
        return focused.id if focused is not None and focused.id in PANES else "jobs"

    def action_focus_pane(self, name: str) -> None:
        if self.maximised is not None and self.maximised != name:
            self.maximised = name  # the maximised view follows the focus
            self.share_heights()
        self.query_one(f"#{name}").focus()

    def action_maximise(self) -> None:
        pane = self.focused_pane()
        self.maximised = None if self.maximised == pane else pane
        self.query_one(f"#{pane}").focus()
        self.share_heights()

    def action_choose_column(self, step: int) -> None:
        """`<` / `>`: choose the focused pane's column the sort key sorts by."""
        pane = self.focused_pane()
        widget = self.query_one(HoldersView) if pane == "holders" else self._table(pane)
        widget.choose_column(step)

    def action_sort_column(self) -> None:
        """Sort the focused pane by its chosen column (again: reversed; again: natural order);
        the cursor stays on its row, in view, and every refresh keeps the sort."""
        pane = self.focused_pane()
        host = self.host
        if pane == "holders":
            view = self.query_one(HoldersView)
            sort = host.holder_sort
            names = COLUMNS[host.group_by]
            column = view.chosen if view.chosen in names else (sort or (names[0], False))[0]
            first_descending = column in FIRST_DESCENDING
            host.holder_sort = next_sort(sort, column, first_descending=first_descending)
            self.show_data()
        else:
            table = self._table(pane)
            table.sort_chosen()
            self.show_data()
            table.move_cursor(row=table.cursor_row, scroll=True)

    def _table(self, pane: str) -> PaneTable:
        return self.query_one(f"#{pane}", PaneTable)

    def action_refresh(self) -> None:
        self.host.refresh_now()

    def action_pause(self) -> None:
        self.host.toggle_pause()

    def action_group(self) -> None:
        host = self.host
        host.group_by = "session" if host.group_by == "job" else "job"
        if host.holder_sort and host.holder_sort[0] not in COLUMNS[host.group_by]:
            host.holder_sort = None
        self.show_data()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_close_filter(self) -> None:
        """Escape on the dashboard: close the filter, else the log, else the maximised pane."""
        box = self.query_one("#filter", Input)
        log = self.query_one("#log", RichLog)
        if box.has_class("-shown"):
            box.value = ""
            box.remove_class("-shown")
            self.query_one(HoldersView).focus()
        elif log.has_class("-shown"):
            log.remove_class("-shown")
        elif self.maximised is not None:
            self.maximised = None
            self.share_heights()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id != "filter":
            return
        self.host.text_filter = event.value
        if self.host.snapshot is not None:
            with self.app.batch_update():
                self.show_data()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.remove_class("-shown")
            self.query_one(HoldersView).focus()

    def action_toggle_log(self) -> None:
        self.query_one("#log", RichLog).toggle_class("-shown")

    # --- selection: describe, screens and mutations (actions.py) ----------------------

    def on_pane_table_row_selected(self, event: PaneTable.RowSelected) -> None:
        self.selection.describe(event.table.id)

    def action_describe(self) -> None:
        self.selection.describe(self.focused_pane())

    def action_duplicates(self) -> None:
        self.selection.duplicates()

    def action_older(self) -> None:
        self.selection.older()

    def action_timeline(self) -> None:
        self.selection.timeline()

    def action_audit(self) -> None:
        self.selection.audit()

    def action_trigger(self) -> None:
        if not self.refused("trigger"):
            self.selection.trigger()

    def action_pause_job(self) -> None:
        self.selection.pause_job()

    def action_release(self) -> None:
        if not self.refused("force-release"):
            self.selection.release()

    # --- the story of a slot, the alerts, time travel (story_actions.py) ----------------

    def action_story(self) -> None:
        self.stories.story()

    def action_alerts(self) -> None:
        self.stories.alerts()

    def action_travel(self) -> None:
        self.stories.travel()

    def action_now(self) -> None:
        self.stories.now()

    def open_story(self, job: str, slot: datetime) -> None:
        """The story of `job`'s `slot` (from the timeline, the alerts)."""
        self.stories.open_story(job, slot)


def _title(widget: Widget, title: str) -> None:
    if str(widget.border_title) != title:  # setting it repaints, even when unchanged
        widget.border_title = title
