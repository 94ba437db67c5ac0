"""The duplicate keys of a job's idempotency table, paged by the database.

    DuplicatesScreen(console, job)

The summary (groups, surplus rows, whether a unique key exists), one page of duplicate groups
(n / p: next and previous page, each loaded in a thread worker while a loading indicator
shows), the rows of the selected group (Enter), the DDL that adds the missing unique key, and
an export of every duplicate row to CSV (e). Database errors show in the screen. Escape goes
back. Every call goes through the console facade; nothing here knows SQL.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static
from textual.worker import Worker, WorkerState

from lockconsole.config.urls import redact
from lockconsole.text.safe import data_text, printable_lines, shown
from lockconsole.text.times import stamp

if TYPE_CHECKING:
    from lockconsole.backends.duplicates import DuplicatePage, DuplicateSummary
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import DuplicateGroup

PAGE_SIZE = 50
WHAT_FAILED = {
    "dup-summary": "reading the summary",
    "dup-page": "reading a page of groups",
    "dup-rows": "reading the rows of a group",
    "dup-export": "exporting",
}


CELL_WIDTH = 64  # terminal cells of a key or value at most ('…' when cut)


def _cell(value: object) -> Text:
    """A table value as data: never markup, controls escaped, at most CELL_WIDTH cells; a
    timestamp in the one time format (UTC, milliseconds when it has them)."""
    if isinstance(value, datetime):
        value = stamp(value, ms=bool(value.microsecond), zone=value.tzinfo is not None)
    return data_text("NULL" if value is None else value, limit=CELL_WIDTH)


class DuplicatesScreen(Screen[None]):
    """Duplicate groups of one job's idempotency table, with rows, DDL fix and CSV export."""

    DEFAULT_CSS = """
    DuplicatesScreen { layout: vertical; }
    DuplicatesScreen #dup-title { text-style: bold; background: $panel; padding: 0 1; }
    DuplicatesScreen #dup-summary { padding: 0 1; }
    DuplicatesScreen #dup-error { color: $error; padding: 0 1; display: none; }
    DuplicatesScreen #dup-error.-shown { display: block; }
    DuplicatesScreen #groups { height: 1fr; min-height: 5; }
    DuplicatesScreen #page-line { color: $text-muted; padding: 0 1; }
    DuplicatesScreen #rows-title { padding: 0 1; color: $text-muted; }
    DuplicatesScreen #rows { height: 5; }
    DuplicatesScreen #ddl {
        height: auto; max-height: 4; padding: 0 1; background: $boost; color: $text-muted;
    }
    DuplicatesScreen #export-path { display: none; }
    DuplicatesScreen #export-path.-shown { display: block; }
    """
    BINDINGS = [
        Binding("n", "next_page", "Next page", id="duplicates_next_page"),
        Binding("p", "previous_page", "Prev page", id="duplicates_previous_page"),
        Binding("e", "export", "Export CSV", id="duplicates_export"),
        Binding("r", "reload", "Reload", id="duplicates_reload"),
        Binding("escape", "back", "Back", id="duplicates_back"),
    ]

    class SummaryLoaded(Message):
        def __init__(self, summary: DuplicateSummary) -> None:
            super().__init__()
            self.summary = summary

    class DdlLoaded(Message):
        def __init__(self, ddl: str) -> None:
            super().__init__()
            self.ddl = ddl

    class PageLoaded(Message):
        def __init__(self, page: int, result: DuplicatePage) -> None:
            super().__init__()
            self.page = page
            self.result = result

    class RowsLoaded(Message):
        def __init__(self, key: tuple[object, ...], rows: list[dict[str, Any]]) -> None:
            super().__init__()
            self.key = key
            self.rows = rows

    class Exported(Message):
        def __init__(self, path: str, count: int) -> None:
            super().__init__()
            self.path = path
            self.count = count

    def __init__(self, console: ConsoleFacade, job: str, *, page_size: int = PAGE_SIZE) -> None:
        super().__init__()
        self.console = console
        self.job = job
        self.page_size = page_size
        self.page = 0
        self.has_more = False
        self.summary: DuplicateSummary | None = None
        self.groups: tuple[DuplicateGroup, ...] = ()
        self.key_columns = self._key_columns()
        self.wanted_page = 0  # the newest request wins: a slow, older answer is dropped
        self.wanted_key: tuple[object, ...] | None = None

    def _key_columns(self) -> tuple[str, ...]:
        """The key column names from the configuration, for the table headings."""
        try:
            spec = self.console.config.job(self.job).idempotency
        except Exception:
            return ()
        return tuple(spec.key) if spec is not None else ()

    def _table_label(self) -> str:
        try:
            spec = self.console.config.job(self.job).idempotency
        except Exception:
            return "its idempotency table"
        if spec is None:
            return "its idempotency table"
        return f"{spec.table}({', '.join(spec.key)})"

    def compose(self) -> ComposeResult:
        yield Static(
            shown(f"Duplicates · {self.job} · {self._table_label()}"), id="dup-title", markup=False
        )
        yield Static("Counting duplicate keys…", id="dup-summary", markup=False)
        yield Static("", id="dup-error", markup=False)
        yield DataTable(id="groups", cursor_type="row", zebra_stripes=True)
        yield Static("", id="page-line", markup=False)
        yield Static("Rows of a group: Enter on it", id="rows-title", markup=False)
        yield DataTable(id="rows", cursor_type="row", zebra_stripes=True)
        yield Static("", id="ddl", markup=False)
        yield Input(placeholder="CSV file to write", id="export-path")
        yield Footer()

    def on_mount(self) -> None:
        groups = self.query_one("#groups", DataTable)
        names = self.key_columns or ("key",)
        groups.add_columns(*(data_text(n) for n in names), "rows", "run ids")
        groups.focus()
        self.action_reload()

    # --- workers (thread): each posts an immutable result ---------------------------------

    @work(thread=True, exclusive=True, group="dup-summary", exit_on_error=False)
    def load_summary(self) -> None:
        self.post_message(self.SummaryLoaded(self.console.duplicate_summary(self.job)))
        self.post_message(self.DdlLoaded(self.console.duplicate_ddl(self.job)))

    @work(thread=True, exclusive=True, group="dup-page", exit_on_error=False)
    def load_page(self, page: int) -> None:
        result = self.console.duplicates(self.job, page=page, page_size=self.page_size)
        self.post_message(self.PageLoaded(page, result))

    @work(thread=True, exclusive=True, group="dup-rows", exit_on_error=False)
    def load_rows(self, key: tuple[object, ...]) -> None:
        self.post_message(self.RowsLoaded(key, self.console.duplicate_rows(self.job, key)))

    @work(thread=True, exclusive=True, group="dup-export", exit_on_error=False)
    def export(self, path: str) -> None:
        self.post_message(self.Exported(path, self.console.export_duplicates(self.job, path)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker errors land: a message in the screen, never a crash."""
        worker = event.worker
        if event.state != WorkerState.ERROR or worker.group not in WHAT_FAILED:
            return
        if worker.group == "dup-page":
            self.query_one("#groups", DataTable).loading = False
        elif worker.group == "dup-rows":
            self.query_one("#rows", DataTable).loading = False
        elif worker.group == "dup-summary":
            self.query_one("#dup-summary", Static).update("Summary unavailable")
        error = self.query_one("#dup-error", Static)
        error.update(shown(f"Error {WHAT_FAILED[worker.group]}: {worker.error}"))
        error.add_class("-shown")

    def _clear_error(self) -> None:
        self.query_one("#dup-error", Static).remove_class("-shown")

    # --- results --------------------------------------------------------------------------

    def on_duplicates_screen_summary_loaded(self, message: SummaryLoaded) -> None:
        s = message.summary
        self.summary = s
        cols = ", ".join(self.key_columns) or "the key"
        if s.has_unique_key is None:
            unique = Text("unique key: unknown (the database would not say)", style="dim")
        elif s.has_unique_key:
            unique = data_text(f"a unique key on ({cols}) exists", style="green")
        else:
            unique = data_text(f"NO unique key on ({cols})", style="bold red")
        counts = Text(
            f"{s.groups} duplicated keys · {s.surplus_rows} surplus rows · ",
            style="bold" if s.groups else "green",
        )
        self.query_one("#dup-summary", Static).update(counts + unique)
        self._update_page_line()

    def on_duplicates_screen_ddl_loaded(self, message: DdlLoaded) -> None:
        self.query_one("#ddl", Static).update(Text(printable_lines(redact(message.ddl))))

    def on_duplicates_screen_page_loaded(self, message: PageLoaded) -> None:
        if message.page != self.wanted_page:
            return
        self._clear_error()
        self.page, self.has_more = message.page, message.result.has_more
        self.groups = tuple(message.result.groups)
        table = self.query_one("#groups", DataTable)
        table.loading = False
        table.clear()
        width = max(len(self.key_columns), 1)
        for index, group in enumerate(self.groups):
            key = [_cell(v) for v in group.key]
            key = key[:width] if self.key_columns else [Text(", ").join(key)]
            runs = ", ".join(str(r) for r in group.run_ids) or "—"
            table.add_row(*key, str(group.count), runs, key=str(index))
        table.move_cursor(row=0)
        self._update_page_line()

    def on_duplicates_screen_rows_loaded(self, message: RowsLoaded) -> None:
        if message.key != self.wanted_key:
            return
        self._clear_error()
        table = self.query_one("#rows", DataTable)
        table.loading = False
        table.clear(columns=True)
        which = Text(", ").join(_cell(v) for v in message.key)
        self.query_one("#rows-title", Static).update(
            Text.assemble(f"{len(message.rows)} rows with key (", which, ")")
        )
        if message.rows:
            table.add_columns(*(_cell(c) for c in message.rows[0]))
            for row in message.rows:
                table.add_row(*[_cell(v) for v in row.values()])

    def on_duplicates_screen_exported(self, message: Exported) -> None:
        where = os.path.abspath(message.path)
        self.notify(
            shown(f"Exported {message.count} duplicate rows to {where}"),
            title="Export",
            markup=False,
        )

    def _update_page_line(self) -> None:
        first = self.page * self.page_size + 1
        last = self.page * self.page_size + len(self.groups)
        total = f" of {self.summary.groups}" if self.summary is not None else ""
        span = f"groups {first}–{last}{total}" if self.groups else "no duplicate groups"
        hints = "n next · p previous · Enter rows · e export"
        self.query_one("#page-line", Static).update(f"page {self.page + 1} · {span} · {hints}")

    # --- actions --------------------------------------------------------------------------

    def _show_page(self, page: int) -> None:
        self.wanted_page = page
        self.query_one("#groups", DataTable).loading = True
        self.load_page(page)

    def action_reload(self) -> None:
        self.load_summary()
        self._show_page(self.page)

    def action_next_page(self) -> None:
        if self.has_more:
            self._show_page(self.page + 1)
        else:
            self.notify("This is the last page", severity="information")

    def action_previous_page(self) -> None:
        if self.page > 0:
            self._show_page(self.page - 1)
        else:
            self.notify("This is the first page", severity="information")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id != "groups" or not self.groups:
            return
        event.stop()
        group = self.groups[int(event.row_key.value or 0)]
        self.wanted_key = tuple(group.key)
        self.query_one("#rows", DataTable).loading = True
        self.load_rows(self.wanted_key)

    def action_export(self) -> None:
        path = self.query_one("#export-path", Input)
        if not path.value:
            path.value = f"{self.job}-duplicates.csv"
        path.add_class("-shown")
        path.border_title = "Export every duplicate row to (Enter writes, Esc cancels)"
        path.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "export-path":
            return
        event.stop()
        target = event.value.strip() or f"{self.job}-duplicates.csv"
        self._hide_export()
        if not os.path.exists(target):
            self._start_export(target)
            return
        from lockconsole.tui.screens.confirm import ConfirmModal

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._start_export(target)
            else:
                self.notify(shown(f"Not exported: {target} is kept as it was"), markup=False)

        where = os.path.abspath(target)
        self.app.push_screen(
            ConfirmModal(f"Overwrite {where}?", f"{where} exists. Replace it with the export?"),
            confirmed,
        )

    def _start_export(self, target: str) -> None:
        self.notify(shown(f"Exporting duplicate rows to {target}…"), title="Export", markup=False)
        self.export(target)

    def _hide_export(self) -> None:
        self.query_one("#export-path", Input).remove_class("-shown")
        self.query_one("#groups", DataTable).focus()

    def action_back(self) -> None:
        if self.query_one("#export-path", Input).has_class("-shown"):
            self._hide_export()
        else:
            self.dismiss(None)
