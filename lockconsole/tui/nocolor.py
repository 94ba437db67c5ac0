"""NO_COLOR (no-color.org): the console's own styles drop their colour.

Every state the console colours is also told by its text or a glyph (`✖ down`, `● ok`,
`! STALE`, `DOUBLE RUN`, `FAILED`); where a colour was the only cue (a stale holder in the
jobs pane, a bad outcome), the colourless style adds reverse video instead. Textual's own
monochrome filter greys the rest (borders, backgrounds, the theme).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TypeVar

from rich.style import Style
from rich.text import Span, Text

ALARM = "bold #ff6e6e"  # a problem: light enough for 6:1 on the dark theme's backgrounds
ALARM_COLOURS = {"red", "bright_red", "yellow", "bright_yellow", "#ff6e6e"}  # not decoration
Cell = TypeVar("Cell")


def requested(environ: Mapping[str, str] | None = None) -> bool:
    """True when NO_COLOR is set (read before Textual's App takes it out of the environment)."""
    return "NO_COLOR" in (os.environ if environ is None else environ)


def _plain(style: str | Style) -> Style:
    parsed = Style.parse(style) if isinstance(style, str) else style
    alarm = parsed.color is not None and parsed.color.name in ALARM_COLOURS
    plain = parsed.without_color
    return plain + Style(reverse=True) if alarm else plain


def without_colour(value: Cell) -> Cell:
    """A rich Text with every colour removed (alarm colours become reverse video); else as is."""
    if not isinstance(value, Text):
        return value
    out = value.copy()
    out.style = _plain(value.style)
    out.spans = [Span(s.start, s.end, _plain(s.style)) for s in value.spans]
    return out  # type: ignore[return-value]
