"""What the console's keys do. A mixin of LockConsoleApp, kept apart so app.py stays small.

Mutations (trigger, release) ask first, run in thread workers, are hidden in --read-only
mode (check_action) and refused there even if invoked directly.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from textual import work
from textual.binding import Binding
from textual.widgets import DataTable, Input, RichLog

from lockconsole.model.views import Holder
from lockconsole.tui.bindings import ACTIONS, DASHBOARD, MUTATING, VIEW_KEYS
from lockconsole.tui.messages import HolderReleased, JobTriggered
from lockconsole.tui.widgets.holders import HoldersView
from lockconsole.tui.widgets.tables import selected_key

if TYPE_CHECKING:
    from lockconsole.tui.app import LockConsoleApp

    _Base = LockConsoleApp
else:
    _Base = object


class ActionsMixin(_Base):
    # --- what is allowed ---------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in MUTATING and self.read_only:
            return False  # hidden from the footer and the palette, and the key does nothing
        # another screen on top (a modal, duplicates, ...): its own keys only
        return not (action in DASHBOARD and len(self.screen_stack) > 1)

    def _refused(self, what: str) -> bool:
        if self.read_only:
            self.notify(f"{what} refused: the console is in --read-only mode",
                        severity="warning")  # fmt: skip
            return True
        return False

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
        self._tick()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if self._timer is not None:
            if self.paused:
                self._timer.pause()
            else:
                self._timer.resume()
                self._tick()
        self._show_status()

    def action_group(self) -> None:
        self.group_by = "session" if self.group_by == "job" else "job"
        self._show_data()

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
        self.text_filter = event.value
        if self.snapshot is not None:
            with self.batch_update():
                self._show_data()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            if not event.value:
                event.input.remove_class("-shown")
            self.query_one(HoldersView).focus()

    def action_toggle_log(self) -> None:
        self.query_one("#log", RichLog).toggle_class("-shown")

    def action_help(self) -> None:
        from lockconsole.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(self.help_rows()))

    def help_rows(self) -> list[tuple[str, str]]:
        rows = []
        for a in ACTIONS:
            if self.check_action(a.action.split("(")[0], ()) is False:
                continue
            key = self._keymap.get(a.id, a.key) if a.id else a.key
            rows.append((self.get_key_display(Binding(key, a.action)), a.help))
        return rows + list(VIEW_KEYS)

    # --- screens -----------------------------------------------------------------------

    def action_duplicates(self) -> None:
        job = self._selected_job()
        if job is None:
            self.notify("Select a job first", severity="warning")
            return
        found = self.facade.config.jobs.get(job)
        if found is None or found.idempotency is None:
            self.notify(f"{job} has no [jobs.{job}.idempotency] table to inspect",
                        severity="warning")  # fmt: skip
            return
        from lockconsole.tui.screens.duplicates import DuplicatesScreen

        self.push_screen(DuplicatesScreen(self.facade, job))

    def action_run_detail(self) -> None:
        key = selected_key(self.query_one("#history", DataTable))
        if key is None or key not in self._runs_of:
            self.notify("Select a run in the history pane (3)", severity="warning")
            return
        from lockconsole.tui.screens.run_detail import RunDetailScreen

        run, slot_runs = self._runs_of[key]
        self.push_screen(RunDetailScreen(run, list(slot_runs)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "history":
            self.action_run_detail()
        elif event.data_table.id == "jobs":
            self.action_timeline()

    def action_timeline(self) -> None:
        job = self._selected_job()
        if job is None or self.snapshot is None:
            self.notify("No data yet" if job else "Select a job first", severity="warning")
            return
        from lockconsole.tui.screens.timeline import TimelineScreen

        self.push_screen(TimelineScreen(self.snapshot, job, now=self.clock()))

    # --- trigger -----------------------------------------------------------------------

    def action_trigger(self) -> None:
        if self._refused("trigger"):
            return
        job = self._selected_job()
        if job is None:
            self.notify("Select a job first", severity="warning")
            return
        if any(w.group == "trigger" and w.is_running for w in self.workers):
            self.notify("A trigger is still running; wait for it", severity="warning")
            return
        from lockconsole.tui.screens.confirm import ConfirmModal

        spec = self.facade.config.jobs.get(job)
        what = " ".join(spec.command) if spec is not None and spec.command else "its callable"
        body = (f"Run {job} here now under its lock ({what}). If another instance holds the "
                f"lock, the run is skipped and nothing else happens.")  # fmt: skip

        def confirmed(yes: bool | None) -> None:
            if yes:
                from lockconsole.engine.stopping import Stop

                self.log_line(f"trigger {job}: starting")
                stop = Stop()
                self._trigger_run = (job, stop)  # what quitting must ask about
                self._run_trigger(job, stop)

        self.push_screen(ConfirmModal(f"Trigger {job}?", body), confirmed)

    @work(thread=True, exclusive=True, group="trigger", exit_on_error=False)
    def _run_trigger(self, job: str, stop: Any) -> None:
        from lockconsole.engine.stopping import Stopped

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

    # --- quit while a triggered run goes on ---------------------------------------------

    def _trigger_ended(self) -> None:
        self._trigger_run = None
        if getattr(self, "_quit_when_done", False):
            self.exit()

    async def action_quit(self) -> None:
        """Quit; with a triggered run still going, ask first: stop it, or wait for it."""
        from lockconsole.tui.screens.confirm import QuitRunModal

        running = getattr(self, "_trigger_run", None)
        if running is None:
            self.exit()
            return
        if isinstance(self.screen, QuitRunModal):
            return
        job, stop = running

        def chosen(choice: str | None) -> None:
            if choice not in ("stop", "wait"):
                return
            if getattr(self, "_trigger_run", None) is None:  # it ended meanwhile
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

    def on_job_triggered(self, message: JobTriggered) -> None:
        run = message.run
        if run.outcome == "skipped":
            text = f"trigger {run.job}: skipped, {run.message or 'the lock is held elsewhere'}"
            self.log_line(text)
            self.notify(text, severity="warning", timeout=8)
        else:
            code = f" (exit {run.exit_code})" if run.exit_code is not None else ""
            text = f"trigger {run.job}: {run.outcome}{code}" + (
                f": {run.message}" if run.message else "")  # fmt: skip
            self.log_line(text)
            self.notify(text, severity="error" if run.outcome != "succeeded" else "information")
        self._tick()

    # --- release -----------------------------------------------------------------------

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
                self.log_line(f"release {holder.job or holder.key} (pid {holder.pid}): asked")
                self._run_release(holder)

        self.push_screen(ReleaseModal(holder), confirmed)

    @work(thread=True, exclusive=True, group="release", exit_on_error=False)
    def _run_release(self, holder: Holder) -> None:
        self.post_message(HolderReleased(self.facade.release(holder)))

    def on_holder_released(self, message: HolderReleased) -> None:
        result = message.result
        self.log_line(f"release: {result.status}: {result.message}")
        severity: Any = "information" if result.status == "released" else "warning"
        self.notify(result.message, title=f"release {result.status}", severity=severity)
        self._tick()
