"""Ask for the moment the dashboard's clock is set back to.

TravelModal(default, zone)  -> datetime | None   the moment typed (Enter goes; Escape cancels); it
                            opens with `default` filled in, in the console's zone
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from lockconsole.text.times import stamp, zone_label
from lockconsole.tui.past import parse_moment
from lockconsole.tui.screens.confirm import DIALOG_CSS


class TravelModal(ModalScreen[datetime | None]):
    """The moment to see the dashboard at: holders from the journal, history as of then."""

    DEFAULT_CSS = "TravelModal {" + DIALOG_CSS + "}"
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="travel_cancel"),
        # q is text in the field; from the buttons (Tab) it quits, as on every screen
        Binding("q", "app.quit", "Quit", show=False, id="quit_from_travel"),
    ]

    def __init__(self, default: datetime, zone: tzinfo | None = None) -> None:
        super().__init__()
        self.default = default
        self.zone = zone

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Go back to a moment", id="title", markup=False)
            yield Static(
                "The holders as the holder journal saw them then, the history as of then. "
                f"Type a time in {zone_label(self.zone)} (02:00:03 is on the day shown), "
                "or ISO 8601 with a zone.",
                id="body",
                markup=False,
            )
            yield Input(stamp(self.default, ms=True, zone=False, tz=self.zone), id="moment")
            with Horizontal(id="buttons"):
                yield Button("Go (Enter)", id="confirm", variant="warning", compact=True)
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#moment", Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self._submit()
        else:
            self.dismiss(None)

    def _submit(self) -> None:
        text = self.query_one("#moment", Input).value
        day = datetime.fromisoformat(stamp(self.default, zone=False, tz=self.zone)).date()
        try:
            moment = parse_moment(text, self.zone, day)
        except ValueError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.dismiss(moment)

    def action_cancel(self) -> None:
        self.dismiss(None)
