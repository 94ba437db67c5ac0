"""Keyed in-place updates of small DataTables (jobs, history), so cursor and scroll survive.

`sync_table(table, rows)` compares the table with `rows` ((row key, cells) in display order):
when the keys and their order are unchanged only the cells that differ are updated
(`DataTable.update_cell`); otherwise the table is rebuilt with the cursor put back on the
same row key and the scroll offset kept. Call it inside `app.batch_update()`.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widgets import DataTable

from lockconsole.text.safe import clean

Cell = str | Text
CELL_WIDTH = 80  # terminal cells of one table cell at most (a 10 KB message ends in '…')
Rows = Sequence[tuple[str, Sequence[Cell]]]


def _same(a: object, b: object) -> bool:
    if isinstance(a, Text) and isinstance(b, Text):
        return a.plain == b.plain and a.style == b.style and a.spans == b.spans
    return a == b


def sync_table(table: DataTable, rows: Rows) -> int:
    """Bring `table` in line with `rows`; returns how many cells (or rows) changed.

    Every cell is shown as data: never parsed as markup, control characters escaped."""
    rows = [(key, [safe_cell(c) for c in cells]) for key, cells in rows]
    current = [key.value for key in table.rows]
    wanted = [key for key, _ in rows]
    if current == wanted:
        changed = 0
        columns = list(table.columns)
        for key, cells in rows:
            old = table.get_row(key)
            for column, before, after in zip(columns, old, cells, strict=False):
                if not _same(before, after):
                    table.update_cell(key, column, after, update_width=True)  # it may grow
                    changed += 1
        return changed
    cursor_key = None
    if table.row_count and 0 <= table.cursor_row < table.row_count:
        cursor_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    scroll_x, scroll_y = table.scroll_x, table.scroll_y
    table.clear()
    for key, cells in rows:
        table.add_row(*cells, key=key)
    if cursor_key in wanted:
        table.move_cursor(row=wanted.index(cursor_key), scroll=False)
    table.scroll_to(scroll_x, scroll_y, animate=False, immediate=True)
    return len(rows)


def safe_cell(cell: Cell) -> Text:
    """A table cell as data: a str is never markup; controls escaped; at most CELL_WIDTH."""
    return clean(cell, limit=CELL_WIDTH)


def selected_key(table: DataTable) -> str | None:
    """The row key under the cursor, or None for an empty table."""
    if not table.row_count:
        return None
    return table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
