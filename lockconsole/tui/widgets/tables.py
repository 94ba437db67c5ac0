"""The sort rules every pane shares, and the keyed in-place updates of a small stock table.

Sorting by a chosen column, for every pane: `step_column` moves the choice along the headings,
`next_sort` is what the sort key does to it (ascending, again descending, a third time the
natural order; `sort_note` says it in the pane's title); the rows are ordered by what a cell
shows: a time, a duration, a number, else text (`table_model.sorted_rows`, `sort_keys.py`).

`sync_table(table, rows)` brings a stock DataTable (the audit screen's: a few hundred rows at
most) in line with `rows` ((row key, cells) in display order): when the keys and their order
are unchanged only the cells that differ are updated (`DataTable.update_cell`, the column
widths following the data); otherwise the table is rebuilt with the cursor put back on the same
row key and the scroll offset kept. Call it inside `app.batch_update()`. The dashboard's panes
are `pane_table.PaneTable`, which paints only its visible rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, tzinfo
from typing import TypeVar

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.widgets import DataTable

from lockconsole.tui.widgets.table_model import Cell, Rows, safe_cell

REBUILD_ABOVE = 16  # changed rows updated cell by cell; more: the table is rebuilt
Column = TypeVar("Column")


def row_cursor_keys(first: str, last: str, enter: str, enter_label: str) -> list[BindingType]:
    """The keys of a painted pane with a row cursor (the holders view, the jobs and history
    panes): arrows and pages move the cursor, `first` / `last` are Home's and End's actions,
    Enter does `enter`, left and right pan the columns."""
    return [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", first, "First", show=False),
        Binding("end,G", last, "Last", show=False),
        Binding("enter", enter, enter_label, show=False),
        Binding("left", "pan(-8)", "Left", show=False),
        Binding("right", "pan(8)", "Right", show=False),
    ]


def step_column(count: int, chosen: int | None, sorted_at: int | None, step: int) -> int:
    """The column chosen after `<` (step -1) or `>` (+1) among `count`: the first press picks
    the sorted column (else the first, or the last going left); then it moves, wrapping."""
    if chosen is None:
        if sorted_at is not None:
            return sorted_at
        return 0 if step > 0 else count - 1
    return (chosen + step) % count


def next_sort(
    current: tuple[Column, bool] | None, column: Column, *, first_descending: bool = False
) -> tuple[Column, bool] | None:
    """The sort after the sort key on `column`: by it (ascending, or descending where that is
    the useful first order), pressed again reversed, a third time the natural order."""
    if current is None or current[0] != column:
        return (column, first_descending)
    if current[1] == first_descending:
        return (column, not first_descending)
    return None


def sort_note(sort: tuple[str, bool] | None) -> str:
    """What a pane's title says of its sort (column, descending): " · sorted by FOR ↓"."""
    return f" · sorted by {sort[0]} {'↓' if sort[1] else '↑'}" if sort else ""


def _same(a: object, b: object) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b


def sync_table(table: DataTable, rows: Rows, *, follow_first: bool = False) -> int:
    """Bring `table` in line with `rows`; returns how many cells (or rows) changed.

    Every cell is shown as data: never parsed as markup, control characters escaped. A row
    whose cells are what they were at the last sync is neither cleaned nor compared again."""
    before: dict[str, tuple[list[Cell], list[Text]]] = getattr(table, "_lockconsole_rows", {})
    kept: dict[str, tuple[list[Cell], list[Text]]] = {}
    same: set[str] = set()
    for key, raw in rows:
        seen = before.get(key)
        if seen is not None and seen[0] == raw:
            kept[key] = seen
            same.add(key)
        else:
            kept[key] = (list(raw), [safe_cell(c) for c in raw])
    table._lockconsole_rows = kept  # type: ignore[attr-defined]
    rows = [(key, kept[key][1]) for key, _ in rows]
    current = [key.value for key in table.rows]
    wanted = [key for key, _ in rows]
    # each update_cell measures its column again: past a few rows, one rebuild is cheaper
    if current == wanted and len(rows) - len(same) <= REBUILD_ABOVE:
        changed = 0
        columns = list(table.columns)
        for key, cells in rows:
            if key in same:
                continue
            old = table.get_row(key)
            for column, before, after in zip(columns, old, cells, strict=False):
                if not _same(before, after):
                    table.update_cell(key, column, after, update_width=True)
                    changed += 1
        _widen(table, [cells for key, cells in rows if key not in same])
        return changed
    cursor_key = None
    if table.row_count and 0 <= table.cursor_row < table.row_count:
        cursor_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    on_first = follow_first and (not current or cursor_key == current[0])
    scroll_x, scroll_y = table.scroll_x, table.scroll_y
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if on_first:  # following the newest row: the cursor stays on top, and so does the view
        table.move_cursor(row=0, scroll=False)
        scroll_y = 0
    elif cursor_key in wanted:
        table.move_cursor(row=wanted.index(cursor_key), scroll=False)
    table.scroll_to(scroll_x, scroll_y, animate=False, immediate=True)
    _widen(table, [cells for _, cells in rows])
    return len(rows)


def _widen(table: DataTable, rows: Sequence[Sequence[Cell]]) -> None:
    """Every column at least as wide as its widest cell among `rows`, now.

    DataTable measures new and updated cells later, when it is idle, and a cell measured in
    between rebuilds can be left out: its column then stays narrower than the cell, which is
    cut with no mark (an instance "i-console" shown as "i-consol"). A column never narrows here.
    """
    columns = list(table.columns.values())
    wider = False
    for cells in rows:
        for column, cell in zip(columns, cells, strict=False):
            width = cell.cell_len if isinstance(cell, Text) else cell_len(cell)
            if width > column.content_width:
                column.content_width = width
                wider = True
    if wider:
        table._require_update_dimensions = True
        table.refresh(layout=True)


def selected_key(table: DataTable) -> str | None:
    """A stock table's row key under the cursor, or None for an empty table."""
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value


def today_in(now: datetime, zone: tzinfo | None) -> date:
    """The day a clock without a date shows, in the console's zone."""
    return now.astimezone(zone or UTC).date()
