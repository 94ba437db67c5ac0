"""The lockconsole dashboard: jobs, lock holders and run history, refreshed by thread workers.

    LockConsoleApp(console, read_only=False, refresh=None, keymap=None, clock=None)
    run_console(config_path=None, *, read_only=False, config=None, console=None) -> exit code

The app holds no business logic and no SQL: every read and action goes through the Console
facade (or the SampleConsole stand-in), always in a thread worker, so a slow or dead
database never blocks a key press. The first frame is the empty layout; data follows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual import work
from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, RichLog, Static
from textual.worker import Worker, WorkerState

from lockconsole.model.views import Snapshot
from lockconsole.text.safe import fit, shown
from lockconsole.text.times import age
from lockconsole.tui import nocolor
from lockconsole.tui.actions import ActionsMixin
from lockconsole.tui.bindings import app_bindings
from lockconsole.tui.messages import SnapshotLoaded
from lockconsole.tui.palette import ActionsProvider
from lockconsole.tui.panes import (
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    banner_text,
    history_rows,
    job_rows,
    status_text,
)
from lockconsole.tui.state import carry_over, failed_databases
from lockconsole.tui.widgets.holder_rows import GroupBy, HolderRows, layout
from lockconsole.tui.widgets.holders import HoldersView
from lockconsole.tui.widgets.tables import sync_table

TOAST_WIDTH = 600  # terminal cells of a notification at most (a long error ends in '…')


class LockConsoleApp(ActionsMixin, App[int]):
    """Three panes over the latest Snapshot, a status line, an error banner and a log."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it
    TITLE = "lockconsole"
    BINDINGS = app_bindings()
    COMMANDS = App.COMMANDS | {ActionsProvider}

    def __init__(self, console: Any, *, read_only: bool = False, refresh: float | None = None,
                 keymap: Mapping[str, str] | None = None,
                 clock: Callable[[], datetime] | None = None) -> None:  # fmt: skip
        self.monochrome = nocolor.requested()  # before Textual's App takes NO_COLOR out
        super().__init__()
        self.facade = console  # the Console facade (App.console is Textual's rich Console)
        self.read_only = read_only or bool(getattr(console, "read_only", False))
        settings = getattr(getattr(console, "config", None), "console", None)
        default = settings.refresh.total_seconds() if settings is not None else 2.0
        self.refresh_interval = float(refresh if refresh is not None else default)
        config_keys = getattr(getattr(console, "config", None), "keymap", None) or {}
        self.user_keymap = dict(keymap if keymap is not None else config_keys)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.snapshot: Snapshot | None = None  # what is on screen (last good data kept)
        self.errors: dict[str, str] = {}  # database (or "refresh") -> the error now
        self.last_good: dict[str, datetime] = {}  # database -> taken_at of its last good data
        self.last_took = 0.0
        self.paused = False
        self.group_by: GroupBy = "job"
        self.text_filter = ""
        self._timer: Timer | None = None
        self._refresh_started: float | None = None  # monotonic start of the running refresh
        self._runs_of: dict[str, Any] = {}
        self.skipped_ticks = 0
        self._shown_status: Any = None
        self._alerts_seen: set[tuple[object, ...]] = set()

    # --- layout ------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="status")
        yield Static(id="banner")
        with Vertical(id="panes"):
            yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
            yield HoldersView(id="holders", clock=self.clock)
            yield DataTable(id="history", cursor_type="row", zebra_stripes=True)
        yield Input(id="filter", placeholder="filter holders and history (Enter keeps, Esc clears)")
        yield RichLog(id="log", max_lines=2000, wrap=True, markup=False, highlight=False)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
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
        self.sub_title = "READ-ONLY" if self.read_only else ""
        jobs.focus()
        self._show_status()
        self._timer = self.set_interval(self.refresh_interval, self._tick)
        self.call_after_refresh(self._tick)  # first frame first, then the database

    # --- refresh -----------------------------------------------------------------------

    def _tick(self) -> None:
        """Start a refresh unless one is still running (a slow database never stacks them)."""
        if self._refresh_started is not None:
            self.skipped_ticks += 1
            self._show_status()
            return
        self._refresh_started = time.monotonic()
        self._load_snapshot(self.snapshot, self.group_by, self.text_filter)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def _load_snapshot(self, previous: Snapshot | None, group_by: GroupBy,
                       text_filter: str) -> None:  # fmt: skip
        started = time.monotonic()
        fresh = self.facade.snapshot()
        took = time.monotonic() - started
        merged = carry_over(previous, fresh, self.facade.config)
        rows = layout(merged.holders, group_by, text_filter)
        self.post_message(SnapshotLoaded(merged, rows, took))

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        snap = message.snapshot
        self.last_took = message.took
        failed = failed_databases(snap)
        self.errors = dict(snap.errors)
        for name in self._database_names():
            if name not in failed:
                self.last_good[name] = snap.taken_at
        rows = message.rows
        if rows.group_by != self.group_by or rows.text_filter != self.text_filter:
            rows = layout(snap.holders, self.group_by, self.text_filter)
        self.snapshot = snap
        for alert in snap.alerts:  # each new alert once, in the log (o shows it)
            # a stale holder's message counts up its idle time: the same alert all along
            seen = (alert.kind, alert.job, alert.slot, alert.database,
                    alert.message.split(" looks stale")[0])  # fmt: skip
            if seen not in self._alerts_seen:
                self._alerts_seen.add(seen)
                self.log_line(f"alert: {alert.message}", show=False)
        with self.batch_update():
            self._show_data(rows)
            self._show_status()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures land: refresh, release and trigger."""
        worker = event.worker
        if worker.group == "refresh" and event.state in (WorkerState.SUCCESS,
                                                         WorkerState.CANCELLED):  # fmt: skip
            # only now may the next tick start a refresh: a worker that posted its snapshot
            # but has not ended yet would be cancelled by the next (exclusive) one
            self._refresh_started = None
            self._show_status()
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        text = " ".join(str(error).split()) or type(error).__name__
        if worker.group == "refresh":
            self._refresh_started = None
            self.errors = {"refresh": f"{type(error).__name__}: {text}"}
            self._show_status()
        else:
            self.log_line(f"{worker.group} failed: {text}")
            self.notify(text, title=f"{worker.group} failed", severity="error", timeout=8)

    def _show_data(self, rows: HolderRows | None = None) -> None:
        snap = self.snapshot
        if snap is None:
            return
        now = self.clock()
        view = self.query_one(HoldersView)
        view.show(
            rows if rows is not None else layout(snap.holders, self.group_by, self.text_filter)
        )
        model = view.model
        shown = model.shown
        counts = f"{model.total} holders" if shown == model.total else f"{shown} of {model.total}"
        extra = [f"{model.waiting} waiting"] * bool(model.waiting)
        extra += [f"{model.stale} stale"] * bool(model.stale)
        extra += [f"{model.unmapped} unmapped"] * bool(model.unmapped)
        _title(view, f"2 Lock holders · {counts}" + "".join(f" · {e}" for e in extra))
        if view.border_subtitle != (by := f"by {self.group_by} (g)"):
            view.border_subtitle = by
        sync_table(self.query_one("#jobs", DataTable), self._paint(job_rows(snap, now)))
        history, self._runs_of = history_rows(snap, now, self.text_filter)
        table = self.query_one("#history", DataTable)
        sync_table(table, self._paint(history))
        bad = sum(a.kind in ("double_run", "missed", "lock_lost", "failed") for a in snap.alerts)
        _title(table, "3 Run history" + (f" · {bad} problems" if bad else ""))

    def _paint(self, rows: list[Any]) -> list[Any]:
        """Table rows as they go on screen: without colour under NO_COLOR."""
        if not self.monochrome:
            return rows
        return [(key, [nocolor.without_colour(c) for c in cells]) for key, cells in rows]

    def _database_names(self) -> list[str]:
        config = getattr(self.facade, "config", None)
        return list(getattr(config, "databases", {}) or {})

    def _show_status(self) -> None:
        now = self.clock()
        busy = None
        if self._refresh_started is not None:
            busy = time.monotonic() - self._refresh_started
        snap = self.snapshot
        text = status_text(
            self._database_names(), self.errors, loaded=snap is not None,
            data_age=age(snap.taken_at, now) if snap else "-", refresh=self.refresh_interval,
            paused=self.paused, read_only=self.read_only, busy=busy,
            alerts=len(snap.alerts) if snap else 0,
        )  # fmt: skip
        if self.monochrome:
            text = nocolor.without_colour(text)
        status = self.query_one("#status", Static)
        if text != self._shown_status:
            self._shown_status = text
            status.update(text, layout=False)  # one line, always: no layout pass
        banner = self.query_one("#banner", Static)
        if self.errors:
            good = [self.last_good[n] for n in self.errors if n in self.last_good]
            if "refresh" in self.errors and snap is not None:
                good = [snap.taken_at]
            shown = banner_text(self.errors, min(good) if good else None, now)
            banner.update(nocolor.without_colour(shown) if self.monochrome else shown)
        degraded = bool(self.errors)
        if banner.has_class("-shown") != degraded:  # the last good data stays, dimmed
            banner.set_class(degraded, "-shown")
            self.query_one("#panes").set_class(degraded, "-degraded")
            self.query_one(HoldersView).dimmed = degraded

    # --- log ---------------------------------------------------------------------------

    def log_line(self, line: str, *, show: bool = True) -> None:
        """Add a line to the log pane: a job's output and alerts are data (shown())."""
        log = self.query_one("#log", RichLog)
        if show:
            log.add_class("-shown")
        log.write(shown(line))

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = False) -> None:  # fmt: skip
        """Every toast (the screens' too) shows its text as data: never markup, no controls."""
        super().notify(fit(shown(message), TOAST_WIDTH), title=fit(shown(title), 80),
                       severity=severity, timeout=timeout, markup=False)  # fmt: skip

    def log_from_thread(self, line: str) -> None:
        try:
            self.call_from_thread(self.log_line, line)
        except RuntimeError:  # the app has gone: drop the line
            pass


def _title(widget: Any, title: str) -> None:
    if str(widget.border_title) != title:  # setting it repaints, even when unchanged
        widget.border_title = title


def run_console(config_path: str | None = None, *, read_only: bool = False,
                config: Any = None, console: Any = None) -> int:  # fmt: skip
    """Open the dashboard on a terminal; returns the exit code."""
    if console is None:
        from lockconsole.config.loader import load_config
        from lockconsole.console.facade import Console

        config = config or load_config(config_path)
        console = Console(config, read_only=read_only)
    try:
        app = LockConsoleApp(console, read_only=read_only)
        app.run()
        return app.return_code or 0
    finally:
        console.close()
