"""Untrusted text on its way to a terminal, a table cell or a CSV file: one rule, here.

Whatever a database, a lock name, a lease row, a table value, a job's output or a server's
error message says is *data*. It is never parsed as Rich or Textual markup, its passwords are
masked (`urls.redact`), and its control characters never reach the terminal: C0 and C1
controls, ESC, DEL and the bidirectional overrides are shown as visible escapes.

    printable("a\\x1b[2Jb")       -> 'a\\\\x1b[2Jb'   (a backslash, then x1b: inert)
    shown(text)                   -> redact(), then printable()
    data_text(text, style="bold") -> a rich Text, never parsed as markup
    fit(text, 12)                 -> at most 12 terminal cells, '…' when cut
    clean(rich_text)              -> the same Text, its spans kept, made printable
    csv_cell(value)               -> a CSV cell a spreadsheet will not run as a formula
    tsv_cell(text)                -> a TSV field: '\\' '\\t' '\\n' '\\r' and the escapes above

`--json` output keeps the original strings (JSON escapes control characters itself); only
passwords are masked there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from lockconsole.config.urls import redact, secrets_version
from lockconsole.text.escape import has_unsafe as has_unsafe  # the rule's own home, re-exported
from lockconsole.text.escape import printable as printable
from lockconsole.text.escape import printable_lines as printable_lines

_T = TypeVar("_T")

if TYPE_CHECKING:  # rich is imported only when a Text is built (the run path stays light)
    from rich.text import Text

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
ELLIPSIS = "…"


def shown(text: object) -> str:
    """What an operator may see of `text`: passwords masked, then made printable."""
    s = text if isinstance(text, str) else str(text)
    if len(s) > 512:  # a query or an output: not worth a cache slot
        return printable(redact(s))
    return _shown_cached(s, secrets_version())


@lru_cache(maxsize=65536)  # refreshes lay out the same names again and again
def _shown_cached(text: str, _version: int) -> str:
    return printable(redact(text))


@lru_cache(maxsize=65536)  # a table's cells come back with every refresh, mostly unchanged
def _looked_at(plain: str, _version: int) -> tuple[str, bool]:
    """(`plain` with its passwords masked, whether it holds a character to escape)."""
    return redact(plain), has_unsafe(plain)


def fit(text: str, width: int) -> str:
    """`text` cut to at most `width` terminal cells (wide characters count two), with '…'."""
    from rich.cells import cell_len, set_cell_size

    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1).rstrip(" ") + ELLIPSIS  # no gap before a wide cut


def pad(text: str, width: int) -> str:
    """`text` fitted into exactly `width` terminal cells (cut with '…' or padded)."""
    from rich.cells import cell_len

    cut = fit(text, width)
    return cut + " " * (width - cell_len(cut))


def data_text(text: object, style: str = "", *, limit: int | None = None) -> Text:
    """A Text showing `text` literally: no markup, passwords masked, controls escaped."""
    from rich.text import Text

    s = shown(text)
    if limit is not None:
        s = fit(s, limit)
    return Text(s, style=style, no_wrap=False, end="")


def clean(text: Text | str, *, limit: int | None = None) -> Text:
    """A copy of the rich Text with its data made printable; styles and spans are kept."""
    from rich.text import Text

    if isinstance(text, str):
        return data_text(text, limit=limit)
    plain = text.plain
    masked, unsafe = (
        _looked_at(plain, secrets_version())
        if len(plain) <= 512
        else (
            redact(plain),
            has_unsafe(plain),
        )
    )
    if masked != plain:  # a password inside: masked over the whole text, its spans let go
        out = Text(printable(masked), style=text.style, no_wrap=text.no_wrap, end=text.end)
    elif not unsafe:
        out = text.copy()
    else:
        cuts = sorted({0, len(plain), *(s.start for s in text.spans), *(s.end for s in text.spans)})
        out = Text(style=text.style, justify=text.justify, no_wrap=text.no_wrap, end=text.end)
        for start, end in zip(cuts, cuts[1:], strict=False):
            piece = Text(printable(plain[start:end]))
            for span in text.spans:
                if span.start <= start and end <= span.end:
                    piece.stylize(span.style)
            out.append_text(piece)
    if limit is not None and out.cell_len > limit:
        out.truncate(limit, overflow="ellipsis")
    return out


def csv_cell(value: _T) -> _T | str:
    """A value for a CSV cell: text that a spreadsheet would run as a formula gets a leading '."""
    if isinstance(value, str) and value.startswith(_FORMULA_START):
        return "'" + value
    return value


# markdown acts on these (emphasis, code, links, raw HTML, tables, headings, strikethrough);
# `&` starts an entity (`&lt;` would show as `<`)
_MARKDOWN = str.maketrans({**{c: "\\" + c for c in "\\`*_{}[]<>|~#"}, "&": "&amp;"})


def markdown_cell(text: object, *, table: bool = True) -> str:
    """Untrusted text inside markdown, read literally: passwords masked, control characters
    escaped, every character markdown would act on backslash-escaped; in a table cell a line
    break is shown as \\n, so one row stays one line."""
    s = redact(text if isinstance(text, str) else str(text)).translate(_MARKDOWN)
    if table:
        s = s.replace("\r", "\\r").replace("\n", "\\n")
    return printable(s)


_TSV_BREAKS = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def tsv_cell(text: object) -> str:
    """A TSV field: passwords masked, a backslash doubled, tab, newline and CR as \\t \\n
    \\r, every other control character as printable() shows it; so one row is one line, its
    fields split on tabs, and each escape reads back to the one character it stands for."""
    s = text if isinstance(text, str) else str(text)
    return printable(redact(s).translate(_TSV_BREAKS))


class MaskedStream:
    """A text stream that masks passwords in everything written through it (CLI stdout/err)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(redact(text))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # flush, isatty, fileno, encoding, ...
        return getattr(self._stream, name)


@contextmanager
def masked_stdio() -> Iterator[None]:
    """While inside, sys.stdout and sys.stderr mask every password on the way out."""
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = MaskedStream(saved[0]), MaskedStream(saved[1])
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved
