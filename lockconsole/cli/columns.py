"""A listing's columns and how they share a width: pure, no I/O, no Rich.

A listing (history, locks, audit, check, dupes) is a list of `Column`s and rows of text. Only
free-text columns (names, messages) are ever cut, with a trailing '…', and never below
`Column.least` cells; a value that means something (a time, a duration, an id, a status) is
shown whole. When the width cannot hold every column so, whole columns are left out, the least
important first (`Column.rank`), as kubectl does, rather than a value being cut.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

TEXT_LEAST = 8  # cells a free-text column keeps before it is left out instead
TEXT_MOST = 64  # cells a free-text cell shows at most in a table (never in TSV or JSON)


@dataclass(frozen=True)
class Column:
    """One column: its header, whether it may be cut, whether only `-o wide` shows it."""

    name: str  # the header, upper case as kubectl writes it
    cut: bool = False  # free text: may be cut with '…'; otherwise always shown whole
    wide: bool = False  # left out of the default view; `-o wide` and `-o tsv` show it
    rank: int = 0  # 0: always shown; higher ranks are left out first when the width is short
    least: int = TEXT_LEAST  # a cut column is never narrower (nor narrower than its header)
    most: int = TEXT_MOST  # a cut column's cells are cut to this many cells in a table


@dataclass(frozen=True)
class Row:
    """One row's cells (raw, untrusted text) and the style a terminal shows it in."""

    cells: tuple[str, ...]
    style: str | None = None


@dataclass(frozen=True)
class Listing:
    """What a listing command shows: its columns, its rows, and what it says when empty."""

    title: str
    columns: tuple[Column, ...]
    rows: tuple[Row, ...]
    empty: str  # said instead of a table when there are no rows
    notes: tuple[str, ...] = field(default=())  # said after the table (sources, errors)

    def view(self, wide: bool) -> Listing:
        """The listing with the columns of the default view only (or every column if wide)."""
        if wide:
            return self
        keep = [i for i, c in enumerate(self.columns) if not c.wide]
        return Listing(
            self.title,
            tuple(self.columns[i] for i in keep),
            tuple(Row(tuple(r.cells[i] for i in keep), r.style) for r in self.rows),
            self.empty,
            self.notes,
        )


def layout(
    columns: Sequence[Column],
    table: Sequence[Sequence[str]],
    width: int,
    gap: int,
    cells: Callable[[str], int] = len,
) -> list[tuple[int, int]]:
    """Which columns to show and how wide: [(column index, width)], fitting `width` if it can.

    `table` holds the header and the rows as they will be printed (escaped); `gap` is the cells
    between two columns; `cells` measures a text in terminal cells.
    """
    natural = [max((cells(line[i]) for line in table), default=0) for i in range(len(columns))]
    least = [
        min(natural[i], max(c.least, cells(c.name))) if c.cut else natural[i]
        for i, c in enumerate(columns)
    ]
    shown = list(range(len(columns)))

    def need(which: list[int], widths: list[int]) -> int:
        return sum(widths[i] for i in which) + gap * max(0, len(which) - 1)

    while need(shown, least) > width:
        droppable = [i for i in shown if columns[i].rank > 0]
        if not droppable:
            break  # what is left means something: wider than asked rather than cut
        # the highest rank goes first; of equal ranks, the rightmost
        shown.remove(max(droppable, key=lambda i: (columns[i].rank, i)))
    widths = list(natural)
    excess = need(shown, widths) - width
    while excess > 0:
        cuttable = [i for i in shown if widths[i] > least[i]]
        if not cuttable:
            break
        widest = max(cuttable, key=lambda i: (widths[i] - least[i], i))
        second = max((widths[i] - least[i] for i in cuttable if i != widest), default=0)
        step = min(
            excess, widths[widest] - least[widest], max(1, widths[widest] - least[widest] - second)
        )
        widths[widest] -= step
        excess -= step
    return [(i, widths[i]) for i in shown]
