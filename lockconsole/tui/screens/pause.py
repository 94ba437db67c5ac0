"""Pause or resume the selected job on the whole fleet, from the dashboard.

PauseModal(job)   -> str | None   the note typed (Enter pauses; Escape cancels; empty refused)
ResumeModal(pause) -> bool        shows who paused it, since when and why; y resumes

`toggle_pause(screen, job)` asks the right one and runs the facade's pause / resume in a
thread worker, then refreshes the dashboard; failures land in the app's log and notifications.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from textual.app import App
from textual.binding import Binding
from textual.widgets import Input

from lockconsole.model.jobs import Pause
from lockconsole.text.safe import shown
from lockconsole.tui.screens.confirm import DIALOG_CSS, ConfirmModal, InputModal

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import Snapshot


class Host(Protocol):
    """What the pause needs of the console app: its facade, its data, its log, a refresh."""

    facade: ConsoleFacade
    snapshot: Snapshot | None

    def log_from_thread(self, line: str) -> None: ...
    def refresh_now(self) -> None: ...
    def call_from_thread(self, callback: Any, *args: Any) -> Any: ...


class PauseModal(InputModal[str]):
    """The note of a pause: why the job must not run (everyone sees it)."""

    DEFAULT_CSS = "PauseModal {" + DIALOG_CSS + "}"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="pause_cancel"),
        # q is text in the note; from the buttons (Tab) it quits, as on every screen
        Binding("q", "app.quit", "Quit", show=False, id="quit_from_pause"),
    ]

    def __init__(self, job: str) -> None:
        super().__init__()
        self.job = job

    def question(self) -> tuple[str, str, Input, str]:
        body = (
            "Every attempt records 'paused' and runs nothing until you resume it. "
            "Why? (the note is shown to everyone)"
        )
        field = Input(placeholder="note, e.g. incident 42: invoices doubled", id="note")
        return shown(f"Pause {self.job} on every instance?"), body, field, "Pause (Enter)"

    def submitted(self, text: str) -> None:
        note = text.strip()
        if not note:
            self.notify("Type a note saying why", severity="warning")
            return
        self.dismiss(note)


def resume_question(pause: Pause) -> tuple[str, list[str]]:
    """The title and the paragraphs of the question before a resume."""
    return f"Resume {pause.job}?", [
        pause.reason(),
        "Resume it: its next attempts on every instance run again.",
    ]


def toggle_pause(app: App[Any], host: Host, job: str) -> None:
    """Ask for a note and pause `job`, or (when it is paused) ask and resume it."""
    status = None
    if host.snapshot is not None:
        status = next((s for s in host.snapshot.jobs if s.job.name == job), None)
    facade = host.facade

    def act(what: str, call: Any) -> None:
        def work() -> None:
            try:
                result = call()
            except Exception as exc:
                host.log_from_thread(f"{what} {job}: {exc}")
                return
            host.log_from_thread(f"{what} {job}: {result}")
            host.call_from_thread(host.refresh_now)

        app.run_worker(work, thread=True, group="pause", exit_on_error=False)

    if status is not None and status.pause is not None:

        def resume(yes: bool | None) -> None:
            if yes:
                act("resume", lambda: "resumed" if facade.resume(job) else "was not paused")

        app.push_screen(ConfirmModal(*resume_question(status.pause)), resume)
        return

    def paused(note: str | None) -> None:
        if note:
            act("pause", lambda: facade.pause(job, note).reason())

    app.push_screen(PauseModal(job), paused)
