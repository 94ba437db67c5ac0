"""The dashboard screen: jobs, lock holders and run history, with its own keys and actions.

    DashboardScreen()   the app's default screen; show_data(rows) / show_status() repaint it

Its BINDINGS are screen-scoped: a screen pushed on top (a modal, duplicates, ...) does not see
them. The refresh and its state, the workers and quitting are the app's (LockConsoleApp).
Mutations (trigger, release) ask first, are hidden in --read-only mode (check_action) and
refused there even if invoked directly.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, RichLog, Static

from lockconsole.model.jobs import Run
from lockconsole.text.times import age
from lockconsole.tui import nocolor
from lockconsole.tui.bindings import MUTATING, dashboard_bindings
from lockconsole.tui.panes import (
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    banner_text,
    history_rows,
    job_rows,
    status_text,
)
from lockconsole.tui.widgets.holder_rows import HolderRows, layout
from lockconsole.tui.widgets.holders import HoldersView
from lockconsole.tui.widgets.tables import selected_key, sync_table

if TYPE_CHECKING:
    from lockconsole.tui.app import LockConsoleApp


class DashboardScreen(Screen[None]):
    """Three panes over the app's latest Snapshot, a status line, an error banner and a log."""

    BINDINGS = dashboard_bindings()

    def __init__(self) -> None:
        super().__init__()
        self._runs_of: dict[str, tuple[Run, list[Run]]] = {}  # history row key -> its run
        self._shown_status: object = None

    @property
    def host(self) -> LockConsoleApp:
        """The app, with its refresh state and workers."""
        return cast("LockConsoleApp", self.app)

    # --- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="banner")
        with Vertical(id="panes"):
            yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
            yield HoldersView(id="holders", clock=self.host.clock)
            yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
        yield Input(id="filter", placeholder="filter holders and history (Enter keeps, Esc clears)")
        yield RichLog(id="log", max_lines=2000, wrap=True, markup=False, highlight=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        jobs = self.query_one("#jobs", DataTable)
        jobs.border_title = "1 Jobs"
        for column in JOB_COLUMNS:
            jobs.add_column(column, key=column)
        history = self.query_one("#history", DataTable)
        history.border_title = "3 Run history"
        for column in HISTORY_COLUMNS:
            history.add_column(column, key=column)
        self.query_one(HoldersView).border_title = "2 Lock holders"
        self.query_one("#log", RichLog).border_title = "Log: output and alerts (o)"
        jobs.focus()
        self.show_status()
        self.host.start_refreshing()

    # --- what is allowed ---------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # a mutation in --read-only mode: hidden from the footer and the palette, key inert
        return not (action in MUTATING and self.host.read_only)

    def _refused(self, what: str) -> bool:
        if self.host.read_only:
            self.notify(f"{what} refused: the console is in --read-only mode", severity="warning")
            return True
        return False

    # --- painting ----------------------------------------------------------------------

    def show_data(self, rows: HolderRows | None = None) -> None:
        """Repaint the panes from the app's snapshot (rows: the holders laid out already)."""
        host = self.host
        snap = host.snapshot
        if snap is None:
            return
        now = host.clock()
        view = self.query_one(HoldersView)
        view.show(
            rows if rows is not None else layout(snap.holders, host.group_by, host.text_filter)
        )
        model = view.model
        shown = model.shown
        counts = f"{model.total} holders" if shown == model.total else f"{shown} of {model.total}"
        extra = [f"{model.waiting} waiting"] * bool(model.waiting)
        extra += [f"{model.stale} stale"] * bool(model.stale)
        extra += [f"{model.unmapped} unmapped"] * bool(model.unmapped)
        _title(view, f"2 Lock holders · {counts}" + "".join(f" · {e}" for e in extra))
        if view.border_subtitle != (by := f"by {host.group_by} (g)"):
            view.border_subtitle = by
        sync_table(self.query_one("#jobs", DataTable), self._paint(job_rows(snap, now)))
        history, self._runs_of = history_rows(snap, now, host.text_filter)
        table = self.query_one("#history", DataTable)
        sync_table(table, self._paint(history))
        bad = sum(a.kind in ("double_run", "missed", "lock_lost", "failed") for a in snap.alerts)
        _title(table, "3 Run history" + (f" · {bad} problems" if bad else ""))

    def _paint(self, rows: list[Any]) -> list[Any]:
        """Table rows as they go on screen: without colour under NO_COLOR."""
        if not self.host.monochrome:
            return rows
        return [(key, [nocolor.without_colour(c) for c in cells]) for key, cells in rows]

    def show_status(self) -> None:
        """Repaint the status line and the error banner from the app's refresh state."""
        host = self.host
        now = host.clock()
        busy = None
        if host.refresh_started is not None:
            busy = time.monotonic() - host.refresh_started
        snap = host.snapshot
        text = status_text(
            host.database_names(),
            host.errors,
            loaded=snap is not None,
            data_age=age(snap.taken_at, now) if snap else "-",
            refresh=host.refresh_interval,
            paused=host.paused,
            read_only=host.read_only,
            busy=busy,
            alerts=len(snap.alerts) if snap else 0,
        )
        if host.monochrome:
            text = nocolor.without_colour(text)
        status = self.query_one("#status", Static)
        if text != self._shown_status:
            self._shown_status = text
            status.update(text, layout=False)  # one line, always: no layout pass
        banner = self.query_one("#banner", Static)
        if host.errors:
            good = [host.last_good[n] for n in host.errors if n in host.last_good]
            if "refresh" in host.errors and snap is not None:
                good = [snap.taken_at]
            shown = banner_text(host.errors, min(good) if good else None, now)
            banner.update(nocolor.without_colour(shown) if host.monochrome else shown)
        degraded = bool(host.errors)
        if banner.has_class("-shown") != degraded:  # the last good data stays, dimmed
            banner.set_class(degraded, "-shown")
            self.query_one("#panes").set_class(degraded, "-degraded")
            self.query_one(HoldersView).dimmed = degraded

    # --- selection ---------------------------------------------------------------------

    def _selected_job(self) -> str | None:
        """The job of the focused pane's selected row (the jobs pane when none applies)."""
        focused = self.focused
        if focused is not None and focused.id == "holders":
            holder = self.query_one(HoldersView).selected_holder
            if holder is not None and holder.job:
                return holder.job
        if focused is not None and focused.id == "history":
            key = selected_key(self.query_one("#history", DataTable))
            if key in self._runs_of:
                return self._runs_of[key][0].job
        return selected_key(self.query_one("#jobs", DataTable))

    # --- navigation and view -----------------------------------------------------------

    def action_focus_pane(self, name: str) -> None:
        self.query_one(f"#{name}").focus()

    def action_refresh(self) -> None:
        self.host.refresh_now()

    def action_pause(self) -> None:
        self.host.toggle_pause()

    def action_group(self) -> None:
        host = self.host
        host.group_by = "session" if host.group_by == "job" else "job"
        self.show_data()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    def action_close_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.has_class("-shown"):
            box.value = ""
            box.remove_class("-shown")
            self.query_one(HoldersView).focus()

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

    # --- screens -----------------------------------------------------------------------

    def action_duplicates(self) -> None:
        job = self._selected_job()
        if job is None:
            self.notify("Select a job first", severity="warning")
            return
        found = self.host.facade.config.jobs.get(job)
        if found is None or found.idempotency is None:
            self.notify(
                f"{job} has no [jobs.{job}.idempotency] table to inspect", severity="warning"
            )
            return
        from lockconsole.tui.screens.duplicates import DuplicatesScreen

        self.app.push_screen(DuplicatesScreen(self.host.facade, job))

    def action_run_detail(self) -> None:
        key = selected_key(self.query_one("#history", DataTable))
        if key is None or key not in self._runs_of:
            self.notify("Select a run in the history pane (3)", severity="warning")
            return
        from lockconsole.tui.screens.run_detail import RunDetailScreen

        run, slot_runs = self._runs_of[key]
        self.app.push_screen(RunDetailScreen(run, list(slot_runs), self.host.facade.run_output))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "history":
            self.action_run_detail()
        elif event.data_table.id == "jobs":
            self.action_timeline()

    def action_timeline(self) -> None:
        job = self._selected_job()
        snapshot = self.host.snapshot
        if job is None or snapshot is None:
            self.notify("No data yet" if job else "Select a job first", severity="warning")
            return
        from lockconsole.tui.screens.timeline import TimelineScreen

        self.app.push_screen(TimelineScreen(snapshot, job, now=self.host.clock()))

    # --- mutations: asked here, run by the app's workers --------------------------------

    def action_trigger(self) -> None:
        if self._refused("trigger"):
            return
        job = self._selected_job()
        if job is None:
            self.notify("Select a job first", severity="warning")
            return
        if any(w.group == "trigger" and w.is_running for w in self.app.workers):
            self.notify("A trigger is still running; wait for it", severity="warning")
            return
        from lockconsole.tui.screens.fleet import TriggerModal, request_on_fleet

        spec = self.host.facade.config.jobs.get(job)
        what = " ".join(spec.command) if spec is not None and spec.command else "its callable"

        slot = self._selected_slot()  # from the history pane: rerun that slot on the fleet

        def chosen(where: str | None) -> None:
            if where == "fleet":
                request_on_fleet(self.app, self.host, job, slot)
            elif where == "here":
                self.host.start_trigger(job)

        self.app.push_screen(TriggerModal(job, what, slot), chosen)

    def _selected_slot(self) -> datetime | None:
        """The scheduled slot of the history pane's selected run, when that pane has focus."""
        if self.focused is None or self.focused.id != "history":
            return None
        key = selected_key(self.query_one("#history", DataTable))
        if key not in self._runs_of:
            return None
        run = self._runs_of[key][0]
        return run.slot if run.trigger == "scheduled" else None

    def action_pause_job(self) -> None:
        if self._refused("pause"):
            return
        job = self._selected_job()
        if job is None:
            self.notify("Select a job first", severity="warning")
            return
        from lockconsole.tui.screens.pause import toggle_pause

        toggle_pause(self.app, self.host, job)

    def action_release(self) -> None:
        if self._refused("force-release"):
            return
        holder = self.query_one(HoldersView).selected_holder
        if holder is None:
            self.notify("Select a lock holder in pane 2 first", severity="warning")
            return
        from lockconsole.tui.screens.confirm import ReleaseModal

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.host.start_release(holder)

        self.app.push_screen(ReleaseModal(holder), confirmed)


def _title(widget: Widget, title: str) -> None:
    if str(widget.border_title) != title:  # setting it repaints, even when unchanged
        widget.border_title = title
