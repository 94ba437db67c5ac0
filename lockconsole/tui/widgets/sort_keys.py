"""What a pane's cell sorts by: the time, the duration or the number it shows, else its text.

The cells are the console's own formats (lockconsole.text.times): a stamp
(YYYY-MM-DD HH:MM:SS), a clock (HH:MM:SS today, MM-DD HH:MM:SS another day) or a span (340ms,
4.2s, 14m05s, 2h03m, 3d04h, read as seconds; "ago" and "in" do not change it). A cell that shows
several, like "ok web-3 10s ago", sorts by the first. Sorting by the text would put
"11-28 23:30:00" after "02:00:00" and "14m05s" before "2h03m".

    cell_key(text, today) -> (kind, value)   kind 0: a time, 1: a number of seconds or a plain
                                             number, 2: text; cells of one kind compare by value
"""

from __future__ import annotations

import re
from datetime import date

_STAMP = re.compile(r"\b(\d{4})-(\d{2})-(\d{2}) (\d{2}):(\d{2}):(\d{2})\b")
_CLOCK = re.compile(r"(?<![\d:-])(?:(\d{2})-(\d{2}) )?(\d{2}):(\d{2}):(\d{2})(?![\d:])")
_SPAN = re.compile(
    r"(?<![\w.])(?:(\d+(?:\.\d+)?)ms|(\d+(?:\.\d+)?)s|(\d+)m(\d{2})s|(\d+)h(\d{2})m|(\d+)d(\d{2})h)"
    r"(?![\w])"
)
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")

Key = tuple[int, float | str]


def cell_key(text: str, today: date) -> Key:
    """The sort key of one cell's text; `today` dates a clock that shows no day."""
    if stamp := _STAMP.search(text):
        y, mo, d, h, mi, s = (int(g) for g in stamp.groups())
        when = _dated(date(y, 1, 1), mo, d, exact=y) if y > 0 else None
        if when is not None and (value := _seconds(when, h, mi, s)) is not None:
            return 0, value
    if clock := _CLOCK.search(text):
        month, day, hour, minute, second = clock.groups()
        when = today if month is None else _dated(today, int(month), int(day))
        if (
            when is not None
            and (value := _seconds(when, int(hour), int(minute), int(second))) is not None
        ):
            return 0, value
    if found := _SPAN.search(text):
        return 1, _span_seconds(found)
    if _NUMBER.fullmatch(stripped := text.strip()):
        return 1, float(stripped)
    return 2, text.lower()


def _seconds(day: date, hour: int, minute: int, second: int) -> float | None:
    """Seconds since the calendar's start; None for a cell (a job's own text, say) that only
    looks like a time."""
    if hour > 23 or minute > 59 or second > 60:
        return None
    return float(day.toordinal() * 86400 + hour * 3600 + minute * 60 + second)


def _dated(today: date, month: int, day: int, exact: int | None = None) -> date | None:
    """MM-DD as the nearest such day to `today` (a clock shows no year), or in the year
    `exact`; None if there is no such day."""
    candidates = []
    years = (exact,) if exact is not None else (today.year - 1, today.year, today.year + 1)
    for year in years:
        if not 1 <= year <= 9999:
            continue
        try:
            candidates.append(date(year, month, day))
        except ValueError:
            continue
    return min(candidates, key=lambda d: abs((d - today).days)) if candidates else None


def _span_seconds(found: re.Match[str]) -> float:
    ms, s, m, m_s, h, h_m, d, d_h = found.groups()
    if ms is not None:
        return float(ms) / 1000
    if s is not None:
        return float(s)
    if m is not None:
        return int(m) * 60 + int(m_s)
    if h is not None:
        return int(h) * 3600 + int(h_m) * 60
    return int(d) * 86400 + int(d_h) * 3600
