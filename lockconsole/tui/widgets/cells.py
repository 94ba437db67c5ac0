"""How the panes' table paints one cell: padded or cut with '…' to exactly its column's width
(never cut without the mark, a wide character at the edge included), its spans' styles kept,
and a row's colours laid over what is painted."""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from lockconsole.text.safe import fit


def cell_segments(cell: Text, width: int) -> list[Segment]:
    """One cell as segments of exactly `width` terminal cells: padded, or cut with '…'."""
    if cell.cell_len > width:
        cell = cell.copy()
        cell.truncate(width, overflow="ellipsis")
        if cell.cell_len > width:  # a wide character at the edge
            cell = Text(fit(cell.plain, width), style=cell.style)
    plain = cell.plain
    base = Style.parse(cell.style) if isinstance(cell.style, str) else cell.style
    pad = " " * (width - cell_len(plain))  # the row's style, not the cell's (reverse video)
    if not cell.spans:
        return [Segment(plain, base), Segment(pad)] if pad else [Segment(plain, base)]
    cuts = sorted({0, len(plain), *(s.start for s in cell.spans), *(s.end for s in cell.spans)})
    out = []
    for start, end in zip(cuts, cuts[1:], strict=False):
        if start >= len(plain):
            break
        style = base
        for span in cell.spans:
            if span.start <= start and end <= span.end:
                extra = span.style
                style = style + (Style.parse(extra) if isinstance(extra, str) else extra)
        out.append(Segment(plain[start:end], style))
    if pad:
        out.append(Segment(pad))
    return out


def over(strip: Strip, style: Style) -> Strip:
    """`style`'s colours over every segment, its other attributes under them."""
    post = Style(color=style.color, bgcolor=style.bgcolor)
    return Strip(Segment.apply_style(iter(strip), style, post), strip.cell_length)
