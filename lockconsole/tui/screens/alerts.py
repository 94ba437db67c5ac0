"""The alerts on screen now, one row each; an alert of a job's slot opens that slot's story.

    AlertsScreen(alerts, now=..., zone=zone, story=callback)   Enter or w: the selected alert's
                                                               story; Escape goes back

An alert without a job and a slot (a stale holder, an unmapped key) has no story: the key says
so in a notice. Every cell is data (`sync_table` shows it literally).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, tzinfo
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from lockconsole.model.views import Alert
from lockconsole.text.times import clock, zone_label
from lockconsole.tui.nocolor import ALARM
from lockconsole.tui.widgets.tables import sync_table

ALERT_COLUMNS = ("KIND", "JOB", "SLOT", "MESSAGE")


def alert_rows(
    alerts: Sequence[Alert], now: datetime, zone: tzinfo | None
) -> list[tuple[str, list[Any]]]:
    """(row key, cells) of each alert, in the order given; a row with a story is marked ▸."""
    rows: list[tuple[str, list[Any]]] = []
    for i, a in enumerate(alerts):
        mark = "▸ " if a.job and a.slot else "  "
        rows.append(
            (
                str(i),
                [
                    Text(mark + a.kind, style=ALARM),
                    a.job or "-",
                    clock(a.slot, now, zone) if a.slot else "-",
                    a.message,
                ],
            )
        )
    return rows


class AlertsScreen(Screen[None]):
    """Every alert of the dashboard's data; the story of an alert's slot one key away."""

    DEFAULT_CSS = """
    AlertsScreen #alerts-title { text-style: bold; background: $panel; padding: 0 1; }
    AlertsScreen #alerts { height: 1fr; }
    """
    BINDINGS = [
        Binding("w", "story", "Story", id="alerts_story"),
        Binding("escape", "back", "Back", id="alerts_back"),
    ]

    def __init__(
        self,
        alerts: Sequence[Alert],
        *,
        now: datetime,
        zone: tzinfo | None = None,
        story: Callable[[str, datetime], None] | None = None,
    ) -> None:
        super().__init__()
        self.alerts = list(alerts)
        self.now = now
        self.zone = zone
        self.open_story = story

    def compose(self) -> ComposeResult:
        count = f"{len(self.alerts)} alert" + ("" if len(self.alerts) == 1 else "s")
        yield Static(
            f"Alerts · {count} · ▸ has a story (enter) · times {zone_label(self.zone)}",
            id="alerts-title",
            markup=False,
        )
        yield DataTable(id="alerts", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#alerts", DataTable)
        for column in ALERT_COLUMNS:
            table.add_column(column, key=column)
        sync_table(table, alert_rows(self.alerts, self.now, self.zone))
        table.focus()

    def selected(self) -> Alert | None:
        table = self.query_one("#alerts", DataTable)
        if not table.row_count:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self.alerts[int(str(key.value))]

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_story()

    def action_story(self) -> None:
        alert = self.selected()
        if alert is None:
            self.notify("No alerts", severity="warning")
            return
        if not (alert.job and alert.slot) or self.open_story is None:
            self.notify("This alert is not of a job's slot: it has no story", severity="warning")
            return
        self.open_story(alert.job, alert.slot)

    def action_back(self) -> None:
        self.dismiss(None)
