"""The dashboard's way into the story of a slot, the alerts and time travel.

    StoryActions(dashboard)   story(), alerts(), travel(), now(), show_past(), refused_in_the_past()

`w` opens the story of the selected slot: the history row's (a scheduled run's slot), else the
selected job's newest slot. `!` lists the alerts; an alert of a job's slot opens its story. `b`
asks for a moment (the selected slot's filled in) and sets the dashboard's clock back to it; the
story screen's `b` goes to the moment of its selected line. `N` comes back to now. While the
dashboard shows the past, every mutation is refused: the holders shown are the journal's, not
sessions that can be ended now.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from textual.widget import Widget
from textual.widgets import Static

from lockconsole.tui import nocolor
from lockconsole.tui.widgets.past_line import past_banner, past_status

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel

    from lockconsole.tui.screens.dashboard.actions import SelectionActions


W = TypeVar("W", bound=Widget)


class Dashboard(Protocol):
    """What these actions need of the dashboard screen (typed here, so that this module does
    not import the dashboard, which imports it)."""

    selection: SelectionActions

    @property
    def host(self) -> Any: ...  # the app: its clock, zone, facade, the past and travel_to

    def notify(self, message: str, *, severity: SeverityLevel = ...) -> None: ...

    def query_one(self, selector: str, expect_type: type[W]) -> W: ...

    def call_after_refresh(self, callback: Any, *args: Any) -> Any: ...

    def share_heights(self) -> None: ...

    def status_overwritten(self) -> None: ...


class StoryActions:
    """Story, alerts and time travel, for the dashboard."""

    def __init__(self, dashboard: Dashboard) -> None:
        self.dashboard = dashboard

    def _warn(self, text: str) -> None:
        self.dashboard.notify(text, severity="warning")

    # --- which slot --------------------------------------------------------------------

    def chosen_slot(self) -> tuple[str, datetime] | None:
        """(job, slot) of the selection: the history row's slot, else the job's newest slot."""
        host = self.dashboard.host
        job = self.dashboard.selection.selected_job()
        if job is None:
            return None
        slot = self.dashboard.selection.selected_slot()
        snap = host.snapshot
        if slot is None and snap is not None:
            mine = [r for r in snap.runs if r.job == job]
            scheduled = [r.slot for r in mine if r.trigger == "scheduled"]
            reported = [r.slot for r in snap.slots if r.job == job]
            slot = max([*scheduled, *reported], default=None) or max(
                (r.slot for r in mine), default=None
            )
        return None if slot is None else (job, slot)

    # --- screens -----------------------------------------------------------------------

    def story(self) -> None:
        chosen = self.chosen_slot()
        if chosen is None:
            if self.dashboard.selection.selected_job() is None:
                self._warn("Select a job or a run first")
            else:
                self._warn("No slot to tell: the job has no run in the history yet")
            return
        self.open_story(*chosen)

    def open_story(self, job: str, slot: datetime) -> None:
        from lockconsole.tui.screens.story import StoryScreen

        host = self.dashboard.host
        host.push_screen(StoryScreen(host.facade, job, slot, zone=host.zone, travel=host.travel_to))

    def alerts(self) -> None:
        from lockconsole.tui.screens.alerts import AlertsScreen

        host = self.dashboard.host
        snap = host.snapshot
        if snap is None:
            self._warn("No data yet")
            return
        screen = AlertsScreen(snap.alerts, now=host.clock(), zone=host.zone, story=self.open_story)
        host.push_screen(screen)

    # --- time travel -------------------------------------------------------------------

    def travel(self) -> None:
        """Ask for a moment (the selected slot's, else the moment shown) and go back to it."""
        from lockconsole.tui.screens.travel import TravelModal

        host = self.dashboard.host
        chosen = self.dashboard.selection.selected_slot()
        default = chosen or host.clock()

        def go(moment: datetime | None) -> None:
            if moment is not None:
                host.travel_to(moment, "typed")

        host.push_screen(TravelModal(default, host.zone), go)

    def now(self) -> None:
        if not self.dashboard.host.back_to_now():
            self.dashboard.notify("The dashboard shows now already")

    def refused_in_the_past(self, what: str) -> bool:
        if self.dashboard.host.past is None:
            return False
        self._warn(f"{what} refused: the dashboard shows the past (N: back to now)")
        return True

    def show_past(self) -> bool:
        """Paint the past's banner and status line; hide the banner when back to now. True
        while the past is shown (the live status line is then not painted)."""
        screen, host = self.dashboard, self.dashboard.host
        banner = screen.query_one("#past", Static)
        past = host.past
        if past is None:
            if banner.has_class("-shown"):
                banner.remove_class("-shown")
                screen.query_one("#panes", Widget).remove_class("-past")
                screen.call_after_refresh(screen.share_heights)
            return False
        back = host.key_for("now")
        text = past_banner(past, host.wall_clock(), host.zone, back)
        status = past_status(past, host.zone)
        if host.monochrome:
            text, status = nocolor.without_colour(text), nocolor.without_colour(status)
        banner.update(text)
        screen.query_one("#status", Static).update(status)
        screen.status_overwritten()  # the live line is painted again once back to now
        if not banner.has_class("-shown"):
            banner.add_class("-shown")
            screen.query_one("#panes", Widget).add_class("-past")
            screen.call_after_refresh(screen.share_heights)
        return True
