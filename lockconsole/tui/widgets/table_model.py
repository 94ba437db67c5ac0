"""A pane table's rows made ready to paint, off the UI thread (pure: no Textual, no I/O).

`table_model(rows, names, sort=..., today=..., previous=...)` takes (row key, cells) in the
pane's natural order and returns a frozen `TableModel`: the rows sorted by the chosen column
(`sorted_rows`), every cell made safe (a str is never markup, control characters escaped,
passwords masked, at most CELL_WIDTH terminal cells, cut with '…'), and each column's width
(its widest cell, at least its heading with the sort mark). A row whose cells are those of
`previous` is not cleaned again. The refresh worker calls it, so the UI thread only swaps
the model in and paints the visible rows (`pane_table.PaneTable`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from rich.text import Text

from lockconsole.text.safe import clean
from lockconsole.tui.widgets.sort_keys import Key, cell_key

Cell = str | Text
Rows = Sequence[tuple[str, Sequence[Cell]]]
SortBy = tuple[int, bool] | None  # (column index, descending), or the natural order
CELL_WIDTH = 80  # terminal cells of one table cell at most (a 10 KB message ends in '…')


@dataclass(frozen=True)
class TableRow:
    key: str  # stable identity of the row across refreshes
    cells: tuple[Text, ...]  # safe to paint
    raw: tuple[Cell, ...]  # as given: a row whose raw cells are unchanged is not cleaned again


@dataclass(frozen=True)
class TableModel:
    rows: tuple[TableRow, ...] = ()
    index: Mapping[str, int] = field(default_factory=dict)  # row key -> position
    widths: tuple[int, ...] = ()  # terminal cells of each column's content
    sort: SortBy = None


def safe_cell(cell: Cell) -> Text:
    """A table cell as data: a str is never markup; controls escaped; at most CELL_WIDTH."""
    return clean(cell, limit=CELL_WIDTH)


def heading(name: str, sort: SortBy, index: int) -> str:
    """A column's heading with its sort mark: "JOB ▲" ascending, "JOB ▼" descending."""
    if sort is not None and sort[0] == index:
        return f"{name} {'▼' if sort[1] else '▲'}"
    return name


def sorted_rows(
    rows: Rows, sort: SortBy, today: date | None = None
) -> list[tuple[str, Sequence[Cell]]]:
    """The rows ordered by one column: by the time, duration or number a cell shows, else its
    text (sort_keys.cell_key; `today` dates a clock without a day). Stable: ties keep their
    order."""
    if sort is None:
        return list(rows)
    column, descending = sort
    day = today or date.today()

    def key(row: tuple[str, Sequence[Cell]]) -> Key:
        cells = row[1]
        cell = cells[column] if column < len(cells) else ""
        return cell_key(cell.plain if isinstance(cell, Text) else str(cell), day)

    return sorted(rows, key=key, reverse=descending)


def _same(a: tuple[Cell, ...], b: tuple[Cell, ...]) -> bool:
    """The same cells, styles included (a rich Text's == compares its text and spans only)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if isinstance(x, Text) and isinstance(y, Text):
            if x.plain != y.plain or x.style != y.style or x.spans != y.spans:
                return False
        elif type(x) is not type(y) or x != y:
            return False
    return True


def table_model(
    rows: Rows,
    names: Sequence[str],
    *,
    sort: SortBy = None,
    today: date | None = None,
    previous: TableModel | None = None,
    paint: Callable[[Cell], Cell] | None = None,
) -> TableModel:
    """The rows sorted, made safe and measured; `paint` restyles each cell first (NO_COLOR)."""
    before = {r.key: r for r in previous.rows} if previous is not None else {}
    out: list[TableRow] = []
    index: dict[str, int] = {}
    widths = [len(heading(n, sort, i)) for i, n in enumerate(names)]
    count = len(widths)
    for key, raw in sorted_rows(rows, sort, today):
        if key in index:  # one key twice: the first row stays addressable, the second is shown
            continue
        raw_cells = tuple(raw)
        seen = before.get(key)
        if seen is not None and _same(seen.raw, raw_cells):
            row = seen
        else:
            painted = [paint(c) for c in raw_cells] if paint is not None else raw_cells
            row = TableRow(key, tuple(safe_cell(c) for c in painted), raw_cells)
        index[key] = len(out)
        out.append(row)
        for i, cell in enumerate(row.cells[:count]):
            width = cell.cell_len
            if width > widths[i]:
                widths[i] = width
    return TableModel(tuple(out), index, tuple(widths), sort)
