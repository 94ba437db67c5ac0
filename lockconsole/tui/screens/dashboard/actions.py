"""What the dashboard does with its selection: describe it, open its screens, act on it.

    SelectionActions(dashboard)   describe(pane), duplicates(), timeline(), trigger(), release()

Every refusal says why in a notice (no selection, nothing to release, nothing to trigger);
the read-only refusal is the dashboard's. The mutations ask first and run in the app's workers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, tzinfo
from functools import partial
from typing import Any, Protocol, TypeVar, cast

from textual.notifications import SeverityLevel
from textual.widget import Widget
from textual.worker_manager import WorkerManager

from lockconsole.console.protocol import ConsoleFacade
from lockconsole.model.jobs import Run
from lockconsole.model.views import Holder, Snapshot
from lockconsole.text.safe import shown as shown_text
from lockconsole.text.times import stamp
from lockconsole.tui.older_runs import OlderRuns, parse_filter
from lockconsole.tui.widgets.consequences import release_consequences, trigger_warnings
from lockconsole.tui.widgets.holders.facts import blocked_pids
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable

W = TypeVar("W", bound=Widget)


class Host(Protocol):
    """What these actions need of the app (LockConsoleApp)."""

    snapshot: Snapshot | None
    read_only: bool
    facade: ConsoleFacade
    clock: Callable[[], datetime]
    zone: tzinfo

    @property
    def workers(self) -> WorkerManager: ...

    def push_screen(self, screen: Any, callback: Any = ...) -> Any: ...

    def start_trigger(self, job: str) -> None: ...

    def start_release(self, holder: Holder) -> None: ...

    def call_from_thread(self, callback: Any, *args: Any) -> Any: ...


class Dashboard(Protocol):
    """What these actions need of the dashboard screen."""

    runs_of: Mapping[str, tuple[Run, list[Run]]]
    older: OlderRuns

    @property
    def host(self) -> Host: ...

    def focused_pane(self) -> str: ...

    def refused(self, what: str) -> bool: ...

    def query_one(self, selector: str, expect_type: type[W]) -> W: ...

    def notify(self, message: str, *, severity: SeverityLevel = ...) -> None: ...

    def show_data(self) -> None: ...

    def open_story(self, job: str, slot: datetime) -> None: ...

    def run_worker(
        self,
        work: Callable[[], None],
        name: str | None = ...,
        group: str = ...,
        description: str = ...,
        exit_on_error: bool = ...,
        start: bool = ...,
        exclusive: bool = ...,
        thread: bool = ...,
    ) -> Any: ...


class SelectionActions:
    """The dashboard's actions on its selected job, holder or run."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    def _warn(self, text: str) -> None:
        self.dashboard.notify(text, severity="warning")

    # --- what is selected --------------------------------------------------------------

    def selected_job(self) -> str | None:
        """The job of the focused pane's selected row (the jobs pane when none applies)."""
        screen = self.dashboard
        pane = screen.focused_pane()
        if pane == "holders":
            holder = screen.query_one("#holders", HoldersView).selected_holder
            if holder is not None and holder.job:
                return holder.job
        if pane == "history":
            key = screen.query_one("#history", PaneTable).selected_key
            if key is not None and key in screen.runs_of:
                return screen.runs_of[key][0].job
        return screen.query_one("#jobs", PaneTable).selected_key

    def selected_holder(self) -> Holder | None:
        return self.dashboard.query_one("#holders", HoldersView).selected_holder

    # --- describe ----------------------------------------------------------------------

    def describe(self, pane: str | None) -> None:
        """Enter or `i`: the selected row of `pane` on a screen of its own."""
        if pane == "holders":
            self.describe_holder()
        elif pane == "history":
            self.describe_run()
        else:
            self.describe_job()

    def describe_holder(self) -> None:
        from lockconsole.tui.screens.describe import HolderScreen

        host = self.dashboard.host
        holder = self.selected_holder()
        if holder is None:
            self._warn("No lock holder selected: there is none, or the filter hides them")
            return
        holders = host.snapshot.holders if host.snapshot is not None else ()
        blocks = blocked_pids(holder, holders)

        def chosen(release: object) -> None:
            if release is True:
                self.ask_release(holder)

        host.push_screen(
            HolderScreen(holder, blocks, zone=host.zone, read_only=host.read_only), chosen
        )

    def describe_job(self) -> None:
        from lockconsole.tui.screens.describe import JobScreen

        host = self.dashboard.host
        job = self.dashboard.query_one("#jobs", PaneTable).selected_key
        snap = host.snapshot
        status = next((s for s in snap.jobs if s.job.name == job), None) if snap else None
        if status is None or snap is None:
            self._warn("No job selected yet: the data is still loading")
            return

        def chosen(choice: object) -> None:
            if choice == "trigger":
                self.ask_trigger(status.job.name)

        screen = JobScreen(
            status, snap.runs, now=host.clock(), zone=host.zone, read_only=host.read_only
        )
        host.push_screen(screen, chosen)

    def describe_run(self) -> None:
        from lockconsole.tui.screens.run_detail import RunDetailScreen

        screen = self.dashboard
        key = screen.query_one("#history", PaneTable).selected_key
        if key is None or key not in screen.runs_of:
            self._warn("No run selected: the history is empty, or this slot had no attempt")
            return
        run, slot_runs = screen.runs_of[key]
        screen.host.push_screen(
            RunDetailScreen(
                run,
                list(slot_runs),
                screen.host.zone,
                partial(screen.host.facade.run_output, job=run.job),  # its ledger's run only
            )
        )

    # --- other screens -----------------------------------------------------------------

    def duplicates(self) -> None:
        host = self.dashboard.host
        job = self.selected_job()
        if job is None:
            self._warn("Select a job first")
            return
        found = host.facade.config.jobs.get(job)
        if found is None or found.idempotency is None:
            self._warn(f"{job} has no [jobs.{job}.idempotency] table to inspect")
            return
        from lockconsole.tui.screens.duplicates import DuplicatesScreen

        host.push_screen(DuplicatesScreen(host.facade, job))

    def timeline(self) -> None:
        host = self.dashboard.host
        job = self.selected_job()
        snapshot = host.snapshot
        if job is None or snapshot is None:
            self._warn("No data yet" if job else "Select a job first")
            return
        from lockconsole.tui.screens.timeline import TimelineScreen

        screen = TimelineScreen(
            snapshot, job, now=host.clock(), zone=host.zone, story=self.dashboard.open_story
        )
        host.push_screen(screen)

    # --- mutations: asked here, run by the app's workers --------------------------------

    def trigger(self) -> None:
        job = self.selected_job()
        if job is None:
            self._warn("Nothing to trigger: select a job first")
            return
        self.ask_trigger(job)

    def ask_trigger(self, job: str) -> None:
        host = self.dashboard.host
        if self.dashboard.refused("trigger"):
            return
        if any(w.group == "trigger" and w.is_running for w in host.workers):
            self._warn("A trigger is still running; wait for it")
            return
        spec = host.facade.config.jobs.get(job)
        if spec is None or not (spec.command or spec.callable):
            self._warn(f"Nothing to trigger: {job} has no command or callable in the config")
            return
        from lockconsole.tui.screens.fleet import TriggerModal, Where, request_on_fleet

        what = " ".join(spec.command) if spec.command else "its callable"
        slot = self.selected_slot()  # from the history pane: rerun that slot on the fleet

        def chosen(where: Where | None) -> None:
            if where is None:
                return
            if where.place == "fleet":
                request_on_fleet(cast(Any, host), cast(Any, host), job, slot, where.instance)
            else:
                host.start_trigger(job)

        warnings = trigger_warnings(spec, host.snapshot, slot, host.clock(), host.zone)
        modal = TriggerModal(job, what, slot, self.instances_of(job), warnings)
        host.push_screen(modal, chosen)

    def instances_of(self, job: str, most: int = 5) -> list[str]:
        """The instances the job ran on lately (the ledger's runs), newest first."""
        snap = self.dashboard.host.snapshot
        runs = sorted(
            (r for r in (snap.runs if snap is not None else ()) if r.job == job and r.instance),
            key=lambda r: r.started_at,
            reverse=True,
        )
        return list(dict.fromkeys(r.instance for r in runs))[:most]

    def selected_slot(self) -> datetime | None:
        """The scheduled slot of the history pane's selected run, when that pane has focus."""
        screen = self.dashboard
        if screen.focused_pane() != "history":
            return None
        key = screen.query_one("#history", PaneTable).selected_key
        if key is None or key not in screen.runs_of:
            return None
        run = screen.runs_of[key][0]
        return run.slot if run.trigger == "scheduled" else None

    def pause_job(self) -> None:
        """Pause the selected job on the whole fleet (a note is asked), or resume it."""
        if self.dashboard.refused("pause"):
            return
        job = self.selected_job()
        if job is None:
            self._warn("Nothing to pause: select a job first")
            return
        from lockconsole.tui.screens.pause import toggle_pause

        host = self.dashboard.host
        toggle_pause(cast(Any, host), cast(Any, host), job)

    def release(self) -> None:
        holder = self.selected_holder()
        if holder is None:
            if self.dashboard.focused_pane() != "holders":
                self._warn("Nothing to release: select a lock holder in pane 2 first")
            else:
                self._warn("Nothing to release: no lock holder is selected")
            return
        self.ask_release(holder)

    def ask_release(self, holder: Holder) -> None:
        host = self.dashboard.host
        if self.dashboard.refused("force-release"):
            return
        if not holder.granted:
            blockers = ", ".join(map(str, holder.blocked_by)) or "the holder"
            self._warn(
                f"Nothing to release: this session only waits for the lock; "
                f"release the session it waits for ({blockers}) instead"
            )
            return
        from lockconsole.tui.screens.confirm import ReleaseModal

        def confirmed(yes: bool | None) -> None:
            if yes:
                host.start_release(holder)

        holders = host.snapshot.holders if host.snapshot is not None else ()
        causes = release_consequences(holder, holders, host.zone)
        modal = ReleaseModal(holder, blocked_pids(holder, holders), host.zone, causes)
        host.push_screen(modal, confirmed)

    def audit(self) -> None:
        """The audit screen: force-releases, triggers, pauses and requests."""
        from lockconsole.tui.screens.audit import AuditScreen

        host = self.dashboard.host
        host.push_screen(AuditScreen(host.facade, now=host.clock, zone=host.zone))

    # --- the history past the snapshot's page ------------------------------------------

    def older(self) -> None:
        """Read one page of runs older than the oldest the history shows, for the filter's
        job:, instance: and outcome: words, from every ledger (in a worker)."""
        screen, host = self.dashboard, self.dashboard.host
        snap = host.snapshot
        if snap is None:
            return
        wanted = parse_filter(getattr(host, "text_filter", ""))
        shown = [r for r in (*snap.runs, *screen.older.runs(wanted)) if wanted.keeps(r)]
        before = min((r.started_at for r in shown), default=snap.taken_at)

        def load() -> None:
            try:
                page = screen.older.load(host.facade, wanted, before)
            except Exception as exc:  # a ledger down, an unknown job: said, not raised
                text = " ".join(str(exc).split()) or type(exc).__name__
                host.call_from_thread(self._warn, f"Older runs: {text}")
                return
            said = (
                f"{len(page)} older runs, back to {stamp(min(r.started_at for r in page))}"
                if page
                else "No older runs"
            )
            host.call_from_thread(screen.show_data)
            host.call_from_thread(screen.notify, shown_text(said))

        screen.run_worker(load, thread=True, group="older", exclusive=True, exit_on_error=False)
