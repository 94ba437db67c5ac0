"""A listing printed: a boxed table on a terminal, plain columns in a pipe, or TSV.

On a terminal: Rich's table at the terminal's width, its rows coloured by what they say. Piped:
kubectl's plain columns, no box drawing, one row a line, at `$COLUMNS` cells (200 when unset).
Both are laid out by `columns.layout`, so a time, a duration, an id or a status is never cut:
only free text is, with '…', and whole columns are left out first. TSV has every column, each
value escaped (`text.safe.tsv_cell`), never cut. What is not a row (a database's note or
error, a summary) goes to stdout on a terminal and to stderr otherwise, so a pipe reads rows
and nothing else; an empty listing says so on stdout (`check`'s "ok: no alerts" is its answer),
except in TSV, where stdout holds the header alone. Nothing is parsed as markup: every value
is data.
"""

from __future__ import annotations

import os
import sys

from rich.cells import cell_len
from rich.console import Console as RichConsole
from rich.table import Table
from rich.text import Text

from lockconsole.cli.columns import Listing, layout
from lockconsole.text.safe import data_text, pad, shown, tsv_cell
from lockconsole.text.safe import fit as fit_cells

PIPED_WIDTH = 200  # a pipe's width when $COLUMNS does not say
GAP = 3  # cells between two plain columns, as kubectl leaves
BOX_GAP, BOX_EDGES = 3, 4  # a boxed table: a border and two pads between columns; at its edges


class _TableConsole(RichConsole):
    """Rich's console, but a reader that went away raises BrokenPipeError for the CLI to end
    quietly with its own exit code (Rich itself exits 1 there)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


out = _TableConsole(highlight=False, markup=False, emoji=False)


def terminal() -> bool:
    """Whether stdout is a terminal (a boxed, coloured table) rather than a pipe or a file."""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def piped_width() -> int:
    """The width of plain columns: `$COLUMNS` if it is a whole number, else PIPED_WIDTH."""
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else PIPED_WIDTH


def say(text: str, style: str = "", *, tsv: bool = False) -> None:
    """A sentence that is not a row: on a terminal on stdout, otherwise on stderr."""
    if terminal() and not tsv:
        out.print(data_text(text, style=style))
    else:
        print(shown(text), file=sys.stderr)


def show(listing: Listing, fmt: str, *, no_headers: bool = False) -> None:
    """Print `listing` as `fmt` asks ('table', 'wide' or 'tsv'), then its notes."""
    if fmt == "tsv":
        _tsv(listing, no_headers)
    else:
        view = listing.view(wide=fmt == "wide")
        if not view.rows:  # the listing's answer (`check`: "ok: no alerts"), on stdout
            _answer(view.empty)
        elif terminal():
            _boxed(view, no_headers)
        else:
            _plain(view, no_headers)
    for note in listing.notes:
        say(note, "red" if note.startswith("error") else "dim", tsv=fmt == "tsv")


def _answer(text: str) -> None:
    if terminal():
        out.print(data_text(text))
    else:  # flushed: a reader that went away is seen now, before the notes go to stderr
        print(shown(text), flush=True)


def _tsv(listing: Listing, no_headers: bool) -> None:
    if not no_headers:
        print("\t".join(tsv_cell(c.name) for c in listing.columns))
    for row in listing.rows:
        print("\t".join(tsv_cell(cell) for cell in row.cells))
    if not listing.rows:
        say(listing.empty, tsv=True)


def _cells(view: Listing) -> list[list[str]]:
    """The header and the rows, escaped as they will be printed."""
    cut = [c.most if c.cut else None for c in view.columns]
    rows = ([_cell(cell, most) for cell, most in zip(r.cells, cut, strict=True)] for r in view.rows)
    return [[c.name for c in view.columns], *rows]


def _cell(value: str, most: int | None) -> str:
    text = shown(value)
    return text if most is None else fit_cells(text, most)


def _plain(view: Listing, no_headers: bool, width: int | None = None) -> None:
    table = _cells(view)
    chosen = layout(view.columns, table, width or piped_width(), GAP, cell_len)
    for line in table[1:] if no_headers else table:
        cells = [pad(line[i], width) for i, width in chosen]
        print((" " * GAP).join(cells).rstrip())


def _boxed(view: Listing, no_headers: bool) -> None:
    cells = _cells(view)
    chosen = layout(view.columns, cells, out.width - BOX_EDGES, BOX_GAP, cell_len)
    if sum(w for _, w in chosen) + BOX_GAP * (len(chosen) - 1) > out.width - BOX_EDGES:
        _plain(view, no_headers, out.width)  # a box would cut what must stay whole: no box
        return
    table = Table(title=view.title, title_justify="left", show_header=not no_headers)
    for i, width in chosen:
        table.add_column(view.columns[i].name, width=width, no_wrap=True, overflow="ellipsis")
    for row, line in zip(view.rows, cells[1:], strict=True):
        table.add_row(*(Text(fit_cells(line[i], w), end="") for i, w in chosen), style=row.style)
    out.print(table)


def say_lines(text: str, *, tsv: bool = False) -> None:
    """Multi-line text (a note, then DDL): each line shown as data, the breaks kept."""
    for line in text.split("\n"):
        say(line, tsv=tsv)
