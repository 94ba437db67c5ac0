"""The lockconsole dashboard: jobs, lock holders and run history, refreshed by thread workers.

    LockConsoleApp(console, read_only=False, refresh=None, keymap=None, clock=None)
    run_console(config_path=None, *, read_only=False, config=None, console=None) -> exit code

The app holds no business logic and no SQL: every read and action goes through the Console
facade (or the SampleConsole stand-in), always in a thread worker, so a slow or dead
database never blocks a key press. The first frame is the empty layout; data follows.
The default screen, DashboardScreen, owns the panes with their keys and actions; the app
keeps what every screen shares: quitting, help, the palette, the refresh and its state, and
the workers.

Time travel: `travel_to(moment)` sets the dashboard's clock back (`clock()` is the moment then;
`wall_clock()` is always now): a worker reads the holders the holder journal saw then and the
history as of then, the past is shown instead of the live data, and the refresh stops until
`back_to_now()` (the live data kept meanwhile comes back first, then a refresh follows).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual import work
from textual.app import App
from textual.css.query import NoMatches
from textual.notifications import SeverityLevel
from textual.timer import Timer
from textual.widgets import RichLog
from textual.worker import Worker, WorkerState

from lockconsole.config.checks import zone_named
from lockconsole.engine.stopping import Stop, Stopped
from lockconsole.model.jobs import Run
from lockconsole.model.views import Holder, Snapshot
from lockconsole.text.safe import fit, shown
from lockconsole.text.times import clock
from lockconsole.tui import nocolor
from lockconsole.tui.bindings import app_bindings
from lockconsole.tui.carry_over import carry_over, failed_databases, news
from lockconsole.tui.collector import Collector
from lockconsole.tui.messages import HolderReleased, JobTriggered, SnapshotLoaded
from lockconsole.tui.palette import ActionsProvider
from lockconsole.tui.pane_models import Panes, PaneView, build_panes
from lockconsole.tui.screens.dashboard.screen import DashboardScreen
from lockconsole.tui.screens.timeline import TimelineScreen
from lockconsole.tui.widgets.holders.rows import GroupBy, SortBy

if TYPE_CHECKING:
    from lockconsole.config.loader import Config
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.tui.past import Past

AGES_EVERY = 1.0  # seconds between repaints of the ages on screen
TOAST_WIDTH = 600  # terminal cells of a notification at most (a long error ends in '…')


class LockConsoleApp(App[int]):
    """The dashboard screen over the latest Snapshot; the refresh, the workers, quitting."""

    CSS_PATH = Path(__file__).with_name("app.tcss")  # absolute: subclasses elsewhere find it
    TITLE = "lockconsole"
    BINDINGS = app_bindings()
    COMMANDS = App.COMMANDS | {ActionsProvider}

    def __init__(
        self,
        console: ConsoleFacade,
        *,
        read_only: bool = False,
        refresh: float | None = None,
        keymap: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.monochrome = nocolor.requested()  # before Textual's App takes NO_COLOR out
        super().__init__()
        self.facade = console  # the Console facade (App.console is Textual's rich Console)
        self.read_only = read_only or console.read_only
        settings = console.config.console
        default = settings.refresh.total_seconds()
        self.refresh_interval = float(refresh if refresh is not None else default)
        self.user_keymap = dict(keymap if keymap is not None else console.config.keymap)
        self.wall_clock = clock or (lambda: datetime.now(UTC))  # now, always
        self.clock = self._dashboard_clock  # the dashboard's: the past moment while there
        self.past: Past | None = None  # the dashboard's clock set back (time travel)
        self._live: Snapshot | None = None  # the live data, kept while the past is shown
        self.zone: tzinfo = zone_named(settings.timezone)  # the one zone times are shown in
        self.snapshot: Snapshot | None = None  # what is on screen (last good data kept)
        self.errors: dict[str, str] = {}  # database (or "refresh") -> the error now
        self.last_good: dict[str, datetime] = {}  # database -> taken_at of its last good data
        self.last_took = 0.0
        self.paused = False
        self.group_by: GroupBy = "job"
        self.holder_sort: SortBy = None
        self.text_filter = ""
        self._timer: Timer | None = None
        self.refresh_started: float | None = None  # monotonic start of the running refresh
        self.skipped_ticks = 0
        self._alerts_seen: set[tuple[object, ...]] = set()
        self._trigger_run: tuple[str, Stop] | None = None  # what quitting must ask about
        self._quit_when_done = False
        self.collector = Collector()  # the snapshots left out of full collections

    # --- screens ----------------------------------------------------------------------

    def get_default_screen(self) -> DashboardScreen:
        return DashboardScreen()

    @property
    def dashboard(self) -> DashboardScreen:
        """The dashboard: always the bottom of the screen stack."""
        return cast(DashboardScreen, self.default_screen)

    def on_mount(self) -> None:
        if self.user_keymap:
            self.set_keymap(self.user_keymap)
        self.sub_title = "READ-ONLY" if self.read_only else ""

    def start_refreshing(self) -> None:
        """The dashboard is up: refresh every interval, the first time after its first frame;
        ages on screen count on every second, paused or not."""
        self._timer = self.set_interval(self.refresh_interval, self._tick)
        self.set_interval(AGES_EVERY, self._count_ages)
        self.call_after_refresh(self._tick)  # first frame first, then the database

    def _count_ages(self) -> None:
        """Repaint what says how old something is (the data, LAST, holders, NEXT)."""
        if not self.dashboard.is_mounted:  # not yet
            return
        try:
            with self.batch_update():
                self.dashboard.show_ages()
                self._show_status()
        except NoMatches:  # the app is shutting down: its panes are gone
            pass

    # --- refresh -----------------------------------------------------------------------

    def _tick(self) -> None:
        """Start a refresh unless one is still running (a slow database never stacks them);
        none while the dashboard shows the past (live data would overwrite it)."""
        if self.past is not None:
            return
        if self.refresh_started is not None:
            self.skipped_ticks += 1
            self._show_status()
            return
        dashboard = self.dashboard
        try:
            view = dashboard.pane_view()
        except NoMatches:  # the interval's tick came before the dashboard's first frame (a
            return  # busy machine): the tick after that frame, or the next one, reads
        self.refresh_started = time.monotonic()
        self._load_snapshot(self.snapshot, view, dashboard.older_runs(), dashboard.panes)

    @work(thread=True, exclusive=True, group="refresh", exit_on_error=False)
    def _load_snapshot(
        self,
        previous: Snapshot | None,
        view: PaneView,
        older: list[Run],
        on_screen: Panes | None,
    ) -> None:
        """Read a snapshot and lay its panes out, here, off the UI thread."""
        started = time.monotonic()
        fresh = self.facade.snapshot()
        took = time.monotonic() - started
        merged, panes = self.prepare(fresh, previous, view, older, on_screen)
        self.post_message(SnapshotLoaded(merged, panes, took))

    def prepare(
        self,
        fresh: Snapshot,
        previous: Snapshot | None,
        view: PaneView,
        older: list[Run],
        on_screen: Panes | None,
    ) -> tuple[Snapshot, Panes]:
        """What the refresh worker makes of a snapshot read, off the UI thread: the last good
        data of failed databases put back, the panes laid out, and the objects alive left out
        of the collector's full walks (`collector.py`)."""
        merged = carry_over(previous, fresh, self.facade.config)
        panes = build_panes(merged, view, self.clock(), older=older, previous=on_screen)
        self.collector.settle()
        return merged, panes

    def on_unmount(self) -> None:
        self.collector.release()

    def on_snapshot_loaded(self, message: SnapshotLoaded) -> None:
        if not self.dashboard.is_attached or not self.dashboard.children:
            return  # the app is closing: its screens are gone, nothing is shown any more
        if self.past is not None:  # a refresh that was out when the clock went back
            self._live = message.snapshot  # kept for the way back to now, not shown
            return
        snap = message.snapshot
        self.last_took = message.took
        failed = failed_databases(snap)
        self.errors = dict(snap.errors)
        for name in self.database_names():
            if name not in failed:
                self.last_good[name] = snap.taken_at
        self.snapshot = snap
        for line in news(snap, self._alerts_seen):  # each new alert and note once (o shows)
            self.log_line(line, show=False)
        try:
            with self.batch_update():
                self.dashboard.show_data(message.panes)
                self._show_status()
        except NoMatches:  # the app is shutting down: its panes are gone
            return
        if isinstance(self.screen, TimelineScreen):  # it follows the dashboard's refresh
            self.run_worker(self.screen.show_snapshot(snap, self.clock()), group="timeline")

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker failures land: refresh, release and trigger."""
        worker = event.worker
        if worker.group == "refresh" and event.state in (
            WorkerState.SUCCESS,
            WorkerState.CANCELLED,
        ):
            # only now may the next tick start a refresh: a worker that posted its snapshot
            # but has not ended yet would be cancelled by the next (exclusive) one
            self.refresh_started = None
            self._show_status()
        if event.state != WorkerState.ERROR:
            return
        error = worker.error
        text = " ".join(str(error).split()) or type(error).__name__
        if worker.group == "refresh":
            self.refresh_started = None
            self.errors = {"refresh": f"{type(error).__name__}: {text}"}
            self._show_status()
        else:
            self.log_line(f"{worker.group} failed: {text}")
            self.notify(text, title=f"{worker.group} failed", severity="error", timeout=8)

    def _show_status(self) -> None:
        try:
            self.dashboard.show_status()
        except NoMatches:  # the app is shutting down: the status line is gone
            pass

    def instance_name(self) -> str:
        """The instance this console's triggers run as."""
        from lockconsole.engine.runner import default_instance

        return self.facade.instance or default_instance(self.facade.config.instance)

    def database_names(self) -> list[str]:
        return list(self.facade.config.databases)

    def refresh_now(self) -> None:
        self._tick()

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        if self._timer is not None:
            if self.paused:
                self._timer.pause()
            else:
                self._timer.resume()
                self._tick()
        self._show_status()

    # --- time travel: the dashboard's clock set back ------------------------------------

    def _dashboard_clock(self) -> datetime:
        """The dashboard's now: the moment it shows while in the past, else the wall clock."""
        past = self.past
        return past.moment if past is not None else self.wall_clock()

    def travel_to(self, moment: datetime, came_from: str = "") -> None:
        """Set the dashboard's clock back to `moment`: the screens above it close, and a worker
        reads the holders the journal saw then and the history as of then."""
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.log_line(f"time travel to {clock(moment, moment, self.zone)}: reading…", show=False)
        self._load_past(moment, came_from)

    @work(thread=True, exclusive=True, group="time travel", exit_on_error=False)
    def _load_past(self, moment: datetime, came_from: str) -> None:
        from datetime import timedelta

        from lockconsole.model.views import RunFilter
        from lockconsole.tui.pane_rows import prepared
        from lockconsole.tui.past import Past, past_snapshot

        config = self.facade.config
        errors: list[tuple[str, str]] = []
        try:
            entries, unread = self.facade.holders_at(moment)
            errors += [(f"holder journal of {name}", why) for name, why in unread]
        except Exception as exc:  # said in the banner: the holders of then are unknown
            entries = []
            errors.append(("holder journal", " ".join(str(exc).split())))
        until = RunFilter(until=moment + timedelta(microseconds=1))  # started by then
        try:
            runs = self.facade.history(limit=config.console.history_limit, where=until)
        except Exception as exc:
            runs = []
            errors.append(("history", " ".join(str(exc).split())))
        snap = past_snapshot(config, moment, entries, runs, errors, self.zone)
        past = Past(moment, prepared(snap), tuple(errors), came_from)
        self.call_from_thread(self._show_past, past)

    def _show_past(self, past: Past) -> None:
        if self.past is None:
            self._live = self.snapshot
        self.past = past
        self.snapshot = past.snapshot
        where = f" ({past.came_from})" if past.came_from else ""
        self.log_line(
            f"showing the past: {clock(past.moment, past.moment, self.zone)}{where}", show=False
        )
        self._repaint()

    def back_to_now(self) -> bool:
        """Back to the live data and the refresh; False when the dashboard shows now already."""
        if self.past is None:
            return False
        self.past = None
        self.snapshot, self._live = self._live, None
        self.log_line("back to now", show=False)
        self._repaint()
        self._tick()
        return True

    def _repaint(self) -> None:
        try:
            with self.batch_update():
                self.dashboard.show_data()
                self._show_status()
                self.dashboard.refresh_bindings()  # the footer offers N only in the past
        except NoMatches:  # the app is shutting down: its panes are gone
            pass

    def key_for(self, binding_id: str) -> str:
        """How the key of a dashboard action is shown, as the keymap binds it ('N')."""
        from textual.binding import Binding

        from lockconsole.tui.bindings import ACTIONS

        default = next(a.key for a in ACTIONS if a.id == binding_id)
        return self.get_key_display(Binding(self._keymap.get(binding_id, default), ""))

    # --- help --------------------------------------------------------------------------

    def action_help(self) -> None:
        from lockconsole.tui.screens.help import HelpScreen, help_rows

        self.push_screen(HelpScreen(help_rows(self, read_only=self.read_only)))

    # --- trigger and release: asked by the dashboard, run here --------------------------

    def start_trigger(self, job: str) -> None:
        """Run the job now under its lock, in a worker; quitting asks about it meanwhile."""
        self.log_line(f"trigger {job}: starting")
        stop = Stop()
        self._trigger_run = (job, stop)
        self._run_trigger(job, stop)

    @work(thread=True, exclusive=True, group="trigger", exit_on_error=False)
    def _run_trigger(self, job: str, stop: Stop) -> None:
        try:
            run = self.facade.trigger(
                job, output=lambda line: self.log_from_thread(f"{job}│ {line}"), stop=stop
            )
            self.post_message(JobTriggered(run))
        except Stopped as exc:
            self.log_from_thread(f"trigger {job}: {exc}, before the lock was taken")
        finally:
            try:
                self.call_from_thread(self._trigger_ended)
            except RuntimeError:  # the app has gone already
                pass

    def _trigger_ended(self) -> None:
        self._trigger_run = None
        if self._quit_when_done:
            self.exit()

    def on_job_triggered(self, message: JobTriggered) -> None:
        run = message.run
        if run.outcome == "skipped":
            text = f"trigger {run.job}: skipped, {run.message or 'the lock is held elsewhere'}"
            self.log_line(text)
            self.notify(text, severity="warning", timeout=8)
        else:
            code = f" (exit {run.exit_code})" if run.exit_code is not None else ""
            text = f"trigger {run.job}: {run.outcome}{code}" + (
                f": {run.message}" if run.message else ""
            )
            self.log_line(text)
            self.notify(text, severity="error" if run.outcome != "succeeded" else "information")
        self._tick()

    def start_release(self, holder: Holder) -> None:
        """Force-release the holder's lock, in a worker."""
        self.log_line(f"release {holder.job or holder.key} (pid {holder.pid}): asked")
        self._run_release(holder)

    @work(thread=True, exclusive=True, group="release", exit_on_error=False)
    def _run_release(self, holder: Holder) -> None:
        self.post_message(HolderReleased(self.facade.release(holder)))

    def on_holder_released(self, message: HolderReleased) -> None:
        result = message.result
        self.log_line(f"release: {result.status}: {result.message}")
        severity: SeverityLevel = "information" if result.status == "released" else "warning"
        self.notify(result.message, title=f"release {result.status}", severity=severity)
        self._tick()

    # --- quit while a triggered run goes on ---------------------------------------------

    async def action_quit(self) -> None:
        """Quit; with a triggered run still going, ask first: stop it, or wait for it."""
        from lockconsole.tui.screens.confirm import QuitRunModal

        running = self._trigger_run
        if running is None:
            self.exit()
            return
        if isinstance(self.screen, QuitRunModal):
            return
        job, stop = running

        def chosen(choice: str | None) -> None:
            if choice not in ("stop", "wait"):
                return
            if self._trigger_run is None:  # it ended meanwhile
                self.exit()
                return
            self._quit_when_done = True
            if choice == "stop":
                self.log_line(f"trigger {job}: stopping it, then quitting")
                stop.request("stopped from the console (quit)")
            else:
                self.log_line(f"trigger {job}: quitting when it ends")
            self.notify("Quitting when the run has ended", timeout=8)

        self.push_screen(QuitRunModal(job), chosen)

    # --- log ---------------------------------------------------------------------------

    def log_line(self, line: str, *, show: bool = True) -> None:
        """Add a line to the log pane: a job's output and alerts are data (shown())."""
        try:
            log = self.dashboard.query_one("#log", RichLog)
        except NoMatches:  # the app is closing: its screens are gone
            return
        if show:
            log.add_class("-shown")
        now = self.wall_clock()
        log.write(shown(f"{clock(now, now, self.zone)} {line}"))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Every toast (the screens' too) shows its text as data: never markup, no controls."""
        super().notify(
            fit(shown(message), TOAST_WIDTH),
            title=fit(shown(title), 80),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def log_from_thread(self, line: str) -> None:
        try:
            self.call_from_thread(self.log_line, line)
        except RuntimeError:  # the app has gone: drop the line
            pass


def run_console(
    config_path: str | None = None,
    *,
    read_only: bool = False,
    config: Config | None = None,
    console: ConsoleFacade | None = None,
) -> int:
    """Open the dashboard on a terminal; returns the exit code."""
    if console is None:
        from lockconsole.config.loader import load_config
        from lockconsole.console.facade import Console

        config = config or load_config(config_path)
        # a console is a long-running sampler: it writes the holder journal unless read-only
        console = Console(
            config, read_only=read_only, journal=config.ledger.journal and not read_only
        )
    try:
        app = LockConsoleApp(console, read_only=read_only)
        app.run()
        return app.return_code or 0
    finally:
        console.close()
