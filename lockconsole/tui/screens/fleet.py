"""Trigger a job from the dashboard: on the fleet (a run request that a `lockconsole schedule`
instance serving the job takes), or here, in the console's process.

TriggerModal(job, what, slot, instances, warnings)  -> Where | None
        f / Enter: on the fleet; h: here; Escape cancels. `i` goes to the instance field: a
        name there (the job's recent instances are offered) asks that instance only, and
        Enter in it sends the request; empty: the first instance serving the job takes it;
        `warnings` (the job holds its lock now, the slot already succeeded) come first
request_on_fleet(app, host, job, slot, instance)   queue the request and follow it in a
        thread worker: each change (queued, running on web-2, succeeded with its run id,
        expired) goes to the log and a toast
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from lockconsole.text.safe import shown
from lockconsole.tui.screens.confirm import DIALOG_CSS

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade

FOLLOW_EVERY = 0.5  # seconds between looks at a request the console follows


class Host(Protocol):
    facade: ConsoleFacade

    def log_from_thread(self, line: str) -> None: ...
    def refresh_now(self) -> None: ...
    def call_from_thread(self, callback: Any, *args: Any) -> Any: ...


class Where(NamedTuple):
    """The trigger's answer: on the fleet (on one instance, or the first that takes it), or
    here, in the console's process."""

    place: Literal["fleet", "here"]
    instance: str | None = None


class TriggerModal(ModalScreen[Where | None]):
    """Where to run the job now: on the fleet (default; on any or one named instance) or here."""

    DEFAULT_CSS = (
        "TriggerModal {"
        + DIALOG_CSS
        + "& #instance { margin-top: 1; } & #warnings { color: $warning; margin-bottom: 1; } }"
    )
    BINDINGS = [
        Binding("f", "choose('fleet')", "On the fleet", id="trigger_fleet"),
        Binding("h", "choose('here')", "Here", id="trigger_here"),
        Binding("i", "instance", "Instance", id="trigger_instance"),
        Binding("escape", "choose('')", "Cancel", id="trigger_cancel"),
        # a modal sees no app keys: q quits from here too, as on every screen (in the
        # instance field it is text: Tab to the buttons first)
        Binding("q", "app.quit", "Quit", id="quit_from_trigger"),
    ]

    def __init__(
        self,
        job: str,
        what: str,
        slot: datetime | None = None,
        instances: Sequence[str] = (),
        warnings: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.job = job
        self.what = what
        self.slot = slot
        self.instances = tuple(instances)  # where the job ran lately, newest first
        self.warnings = tuple(warnings)  # held right now, the slot already succeeded

    def compose(self) -> ComposeResult:
        slot = f" (slot {self.slot.isoformat()})" if self.slot else ""
        body = (
            f"On the fleet: the first `lockconsole schedule` instance serving {self.job} takes "
            f"the request and runs it there under its lock ({self.what}), in its own "
            "environment. Here: this console runs it, under the same lock."
        )
        with Vertical(id="dialog"):
            yield Static(shown(f"Run {self.job} now{slot}?"), id="title", markup=False)
            if self.warnings:  # before the operator chooses: what the run would meet
                text = "\n".join(map(shown, self.warnings))
                yield Static(text, id="warnings", markup=False)
            with VerticalScroll(id="body-scroll"):
                yield Static(shown(body), id="body", markup=False)
            seen = f" (lately: {', '.join(self.instances)})" if self.instances else ""
            yield Input(
                placeholder=shown(f"i: on one instance, by name{seen}; empty: any"),
                id="instance",
                compact=True,
            )
            with Horizontal(id="buttons"):
                yield Button("On the fleet (f)", id="fleet", variant="primary", compact=True)
                if self.slot is None:
                    yield Button("Here (h)", id="here", compact=True)
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#fleet", Button).focus()  # Enter: on the fleet

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_choose("" if event.button.id == "cancel" else str(event.button.id))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_choose("fleet")

    def action_instance(self) -> None:
        self.query_one("#instance", Input).focus()

    def action_choose(self, where: str) -> None:
        if where == "here" and self.slot is not None:
            return  # a slot is rerun by the fleet only
        if where == "here":
            self.dismiss(Where("here"))
        elif where == "fleet":
            name = self.query_one("#instance", Input).value.strip()
            self.dismiss(Where("fleet", name or None))
        else:
            self.dismiss(None)


def request_on_fleet(
    app: App[Any],
    host: Host,
    job: str,
    slot: datetime | None = None,
    instance: str | None = None,
) -> None:
    """Queue a run request for `job` (on `instance` only, when named) and follow it until it
    ends (a thread worker)."""
    facade = host.facade

    def follow() -> None:
        try:
            request_id = facade.request(job, slot=slot, instance=instance)
        except Exception as exc:
            host.log_from_thread(f"request {job}: {exc}")
            return
        target = f" for {instance}" if instance else ""
        host.log_from_thread(f"request {request_id} of {job}: queued{target}")
        seen: tuple[object, ...] = ("queued", None, None)
        while True:
            try:
                found = facade.request_state(job, request_id)
            except Exception as exc:
                host.log_from_thread(f"request {request_id} of {job}: {exc}")
                return
            if found is None:
                return
            now = (found.state, found.served_by, found.run_id)
            if now != seen:
                seen = now
                where = f" on {found.served_by}" if found.served_by else ""
                run = f" (run {found.run_id})" if found.run_id else ""
                why = f": {found.reason}" if found.reason and found.final else ""
                host.log_from_thread(
                    f"request {request_id} of {job}: {found.state}{where}{run}{why}"
                )
            if found.final:
                host.call_from_thread(host.refresh_now)
                return
            time.sleep(FOLLOW_EVERY)

    app.run_worker(follow, thread=True, group="fleet_request", exit_on_error=False)
