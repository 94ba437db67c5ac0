"""Standard five-field cron in UTC, without croniter: the run path's cold start skips its import.

`parse` accepts only a plain subset it computes exactly as croniter does: numbers, `*`, ranges
`a-b`, steps `*/n` and `a-b/n`, lists, and month and weekday names; day of month or day of week
(or both) left as `*`. Anything else (seconds, `@daily`, `L`, `W`, `#`, `?`, wrapping ranges,
both day fields restricted, a timezone other than UTC) gives None, and the caller uses croniter.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# (lowest, highest, names) of minute, hour, day of month, month, day of week (7 is Sunday too)
_FIELDS = ((0, 59, ()), (0, 23, ()), (1, 31, ()), (1, 12, _MONTHS), (0, 7, _DAYS))
_SEARCH_DAYS = 366 * 9  # past any leap-day schedule's gap: an expression firing never gives None
UTC_NAMES = frozenset({"UTC", "Etc/UTC"})


class Cron:
    """The minutes, hours, days, months and weekdays (0 = Sunday) a schedule fires at."""

    __slots__ = ("minutes", "hours", "days", "months", "weekdays")

    def __init__(self, fields: list[frozenset[int]]) -> None:
        self.minutes, self.hours, self.days, self.months, weekdays = fields
        self.weekdays = frozenset(d % 7 for d in weekdays)

    def day_matches(self, when: datetime) -> bool:
        if when.month not in self.months:
            return False
        # one of the two day fields is `*` (parse refuses both restricted): both must match
        return when.day in self.days and (when.isoweekday() % 7) in self.weekdays

    def prev(self, at: datetime) -> datetime | None:
        """The latest firing at or before `at` (UTC), or None if there is none within years."""
        t = at.astimezone(UTC).replace(second=0, microsecond=0)
        last = t - timedelta(days=_SEARCH_DAYS)
        while t >= last:
            if not self.day_matches(t):
                t = t.replace(hour=0, minute=0) - timedelta(minutes=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) - timedelta(minutes=1)
            elif t.minute not in self.minutes:
                t -= timedelta(minutes=1)
            else:
                return t
        return None

    def next(self, after: datetime) -> datetime | None:
        """The first firing strictly after `after` (UTC), or None if there is none within years."""
        t = after.astimezone(UTC).replace(second=0, microsecond=0) + timedelta(minutes=1)
        last = t + timedelta(days=_SEARCH_DAYS)
        while t <= last:
            if not self.day_matches(t):
                t = t.replace(hour=0, minute=0) + timedelta(days=1)
            elif t.hour not in self.hours:
                t = t.replace(minute=0) + timedelta(hours=1)
            elif t.minute not in self.minutes:
                t += timedelta(minutes=1)
            else:
                return t
        return None

    def newest_first(self, start: datetime, end: datetime) -> Iterator[datetime]:
        """Every firing in [start, end] (UTC), newest first, a day at a time: cheap enough to
        list every minute of a long lookback."""
        start, end = start.astimezone(UTC), end.astimezone(UTC)
        hours = sorted(self.hours, reverse=True)
        minutes = sorted(self.minutes, reverse=True)
        day = end.replace(hour=0, minute=0, second=0, microsecond=0)
        while day + timedelta(days=1) > start:
            if self.day_matches(day):
                for hour in hours:
                    for minute in minutes:
                        fire = day.replace(hour=hour, minute=minute)
                        if fire > end:
                            continue
                        if fire < start:
                            return
                        yield fire
            day -= timedelta(days=1)


def parse(expr: str, timezone: str = "UTC") -> Cron | None:
    """The schedule if it is in the plain subset described above, else None."""
    if timezone not in UTC_NAMES:
        return None
    parts = expr.split()
    if len(parts) != 5:
        return None
    fields: list[frozenset[int]] = []
    for text, (low, high, names) in zip(parts, _FIELDS, strict=True):
        values = _field(text.lower(), low, high, names)
        if values is None:
            return None
        fields.append(values)
    if parts[2] != "*" and parts[4] != "*":
        return None  # both day fields restricted: cron's "either day" rule, left to croniter
    return Cron(fields)


def _field(text: str, low: int, high: int, names: tuple[str, ...]) -> frozenset[int] | None:
    values: set[int] = set()
    for item in text.split(","):
        span, slash, step_text = item.partition("/")
        step = 1
        if slash:
            if not step_text.isdigit() or not 0 < int(step_text) <= high:
                return None
            step = int(step_text)
        first: int | None = low
        last: int | None = high
        if span != "*":
            start_text, dash, end_text = span.partition("-")
            first = _value(start_text, low, high, names)
            last = _value(end_text, low, high, names) if dash else first
            if slash and not dash:
                return None  # `5/15`: croniter's own reading
        if first is None or last is None or first > last:
            return None
        values.update(range(first, last + 1, step))
    return frozenset(values)


def _value(text: str, low: int, high: int, names: tuple[str, ...]) -> int | None:
    if text.isdigit() and text.isascii():
        number = int(text)
        return number if low <= number <= high else None
    if text in names:
        return names.index(text) + (1 if names is _MONTHS else 0)
    return None
