"""Who did what: every audited force-release and trigger, newest first.

    AuditScreen(facade, now=clock, zone=zone)   r reloads, Escape goes back

The rows come from `Console.audit()` (the audit table of every SQL database of the
configuration), read in a thread worker; a database that cannot be read is named above the
table, and hides no other. Every cell is data (`sync_table` shows it literally).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from lockconsole.text.safe import shown
from lockconsole.text.times import clock, zone_label
from lockconsole.tui.widgets.tables import sync_table

AUDIT_COLUMNS = ("AT", "ACTION", "JOB", "BY", "DATABASE", "TARGET", "RESULT", "MESSAGE")
RESULT_STYLE = {
    "attempted": "yellow",
    "error": "bold red",
    "released": "green",
    "succeeded": "green",
    "failed": "bold red",
    "lock_lost": "bold red",
    "skipped": "dim",
}


def audit_rows(entries: list[Any], now: datetime, zone: tzinfo | None) -> list[Any]:
    """(row key, cells) of each audit entry, in the order given (newest first)."""
    return [
        (
            f"{e.database}:{e.id}",
            [
                clock(e.at, now, zone),
                e.action,
                e.job or "-",
                f"{e.os_user}@{e.host}",
                e.database,
                e.target,
                Text(e.result, style=RESULT_STYLE.get(e.result, "")),
                e.message or "",
            ],
        )
        for e in entries
    ]


class AuditScreen(Screen[None]):
    """The audit log of every database, newest first."""

    DEFAULT_CSS = """
    AuditScreen #audit-title { text-style: bold; background: $panel; padding: 0 1; }
    AuditScreen #audit-errors { padding: 0 1; color: $error; height: auto; }
    AuditScreen #audit { height: 1fr; }
    """
    BINDINGS = [
        Binding("r", "reload", "Reload", id="audit_reload"),
        Binding("escape", "back", "Back", id="audit_back"),
    ]

    def __init__(
        self, facade: Any, *, now: Callable[[], datetime], zone: tzinfo | None = None
    ) -> None:
        super().__init__()
        self.facade = facade
        self.now = now
        self.zone = zone

    def compose(self) -> ComposeResult:
        yield Static(
            f"Audit · force-releases and triggers · times {zone_label(self.zone)}",
            id="audit-title",
            markup=False,
        )
        yield Static(id="audit-errors", markup=False)
        yield DataTable(id="audit", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#audit", DataTable)
        for column in AUDIT_COLUMNS:
            table.add_column(column, key=column)
        table.loading = True
        table.focus()
        self.action_reload()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="audit", exit_on_error=False)
    def _load(self) -> None:
        try:
            entries, errors = self.facade.audit()
        except Exception as exc:  # the whole read failed: say so, keep what is shown
            entries, errors = None, [("audit", " ".join(str(exc).split()))]
        self.app.call_from_thread(self._show, entries, errors)

    def _show(self, entries: list[Any] | None, errors: list[tuple[str, str]]) -> None:
        table = self.query_one("#audit", DataTable)
        table.loading = False
        if entries is not None:
            sync_table(table, audit_rows(entries, self.now(), self.zone))
            count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
            table.border_title = count
        self.query_one("#audit-errors", Static).update(
            "\n".join(shown(f"⚠ {name}: cannot read its audit log: {e}") for name, e in errors)
        )

    def action_back(self) -> None:
        self.dismiss(None)
