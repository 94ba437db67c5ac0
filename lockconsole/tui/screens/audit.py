"""Who did what: every audited force-release and trigger, newest first.

    AuditScreen(facade, now=clock, zone=zone)   r reloads, Enter or i shows a row, Escape goes back
    AuditDetailScreen(entry, zone=zone)        a modal: every field of one entry; Escape closes

The first column (when) stays in place when the table scrolls right. The rows come from
`Console.audit()` (the audit table of every SQL database of the configuration), read in a
thread worker; a database that cannot be read is named above the table, and hides no other.
Every cell is data (`sync_table` shows it literally), in the detail too (`data_text`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Static

from lockconsole.text.safe import data_text, shown
from lockconsole.text.times import clock, stamp, zone_label
from lockconsole.tui.widgets.tables import sync_table

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import AuditEntry

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


def audit_rows(entries: list[AuditEntry], now: datetime, zone: tzinfo | None) -> list[Any]:
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


def audit_fields(entry: AuditEntry, zone: tzinfo | None) -> Table:
    """Every field of one audit entry, whole, as a two-column grid."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    rows: list[tuple[str, object]] = [
        ("at", stamp(entry.at, tz=zone)),
        ("action", entry.action),
        ("job", entry.job or "-"),
        ("by", f"{entry.os_user}@{entry.host}"),
        ("database", entry.database),
        ("target", entry.target),
        ("result", entry.result),
        ("message", entry.message or "-"),
        ("audit id", f"{entry.database}:{entry.id}"),
    ]
    for label, value in rows:
        grid.add_row(label, data_text(value, limit=2000))
    return grid


class AuditDetailScreen(ModalScreen[None]):
    """One audit entry: every field whole, the cells the table cut included."""

    DEFAULT_CSS = """
    AuditDetailScreen { align: center middle; }
    AuditDetailScreen > #dialog {
        width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    AuditDetailScreen #body { height: auto; max-height: 100%; }
    AuditDetailScreen Footer { dock: bottom; }
    AuditDetailScreen #title { text-style: bold; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="audit_detail_close"),
        # a modal sees no app keys: q quits from here too, as on every screen
        Binding("q", "app.quit", "Quit", id="quit_from_modal"),
    ]

    def __init__(self, entry: AuditEntry, *, zone: tzinfo | None = None) -> None:
        super().__init__()
        self.entry = entry
        self.zone = zone

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            title = f"Audit · {self.entry.action} · {self.entry.result}"
            yield Static(shown(title), id="title", markup=False)
            with VerticalScroll(id="body"):
                yield Static(audit_fields(self.entry, self.zone), id="fields")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#body", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class AuditScreen(Screen[None]):
    """The audit log of every database, newest first."""

    DEFAULT_CSS = """
    AuditScreen #audit-title { text-style: bold; background: $panel; padding: 0 1; }
    AuditScreen #audit-errors { padding: 0 1; color: $error; height: auto; }
    AuditScreen #audit { height: 1fr; }
    """
    BINDINGS = [
        Binding("r", "reload", "Reload", id="audit_reload"),
        # Enter too, as on the dashboard: the table takes it first and selects the row (below)
        Binding("i", "detail", "Detail", id="audit_detail"),
        Binding("escape", "back", "Back", id="audit_back"),
    ]

    def __init__(
        self, facade: ConsoleFacade, *, now: Callable[[], datetime], zone: tzinfo | None = None
    ) -> None:
        super().__init__()
        self.facade = facade
        self.now = now
        self.zone = zone
        self.entries: dict[str, AuditEntry] = {}  # row key -> the entry it shows

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
        table.fixed_columns = 1  # when it happened stays in view as the table scrolls right
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

    def _show(self, entries: list[AuditEntry] | None, errors: list[tuple[str, str]]) -> None:
        table = self.query_one("#audit", DataTable)
        table.loading = False
        if entries is not None:
            rows = audit_rows(entries, self.now(), self.zone)
            self.entries = {key: entry for (key, _), entry in zip(rows, entries, strict=True)}
            sync_table(table, rows)
            count = f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}"
            table.border_title = count
        self.query_one("#audit-errors", Static).update(
            "\n".join(shown(f"⚠ {name}: cannot read its audit log: {e}") for name, e in errors)
        )

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self._detail(str(event.row_key.value))

    def action_detail(self) -> None:
        table = self.query_one("#audit", DataTable)
        if table.row_count:
            key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
            self._detail(str(key.value))

    def _detail(self, key: str) -> None:
        entry = self.entries.get(key)
        if entry is not None:
            self.app.push_screen(AuditDetailScreen(entry, zone=self.zone))

    def action_back(self) -> None:
        self.dismiss(None)
