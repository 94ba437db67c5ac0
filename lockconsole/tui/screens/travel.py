"""Ask for the moment the dashboard's clock is set back to.

TravelModal(default, zone)  -> datetime | None   the moment typed (Enter goes; Escape cancels); it
                            opens with `default` filled in, in the console's zone
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from textual.binding import Binding
from textual.widgets import Input

from lockconsole.text.times import stamp, zone_label
from lockconsole.tui.past import parse_moment
from lockconsole.tui.screens.confirm import DIALOG_CSS, InputModal


class TravelModal(InputModal[datetime]):
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

    def question(self) -> tuple[str, str, Input, str]:
        body = (
            "The holders as the holder journal saw them then, the history as of then. "
            f"Type a time in {zone_label(self.zone)} (02:00:03 is on the day shown), "
            "or ISO 8601 with a zone."
        )
        field = Input(stamp(self.default, ms=True, zone=False, tz=self.zone), id="moment")
        return "Go back to a moment", body, field, "Go (Enter)"

    def submitted(self, text: str) -> None:
        day = datetime.fromisoformat(stamp(self.default, zone=False, tz=self.zone)).date()
        try:
            moment = parse_moment(text, self.zone, day)
        except ValueError as exc:
            self.notify(str(exc), severity="warning")
            return
        self.dismiss(moment)
