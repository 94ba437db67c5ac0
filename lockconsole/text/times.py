"""Short, fixed-width texts for ages, durations and times (no Textual, no I/O)."""

from __future__ import annotations

from datetime import datetime, timedelta


def age(since: datetime | None, now: datetime) -> str:
    """How long ago `since` was: 42s, 14m, 2h03m, 3d04h; '-' when unknown."""
    if since is None:
        return "-"
    return span(now - since)


def span(delta: timedelta) -> str:
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def duration(start: datetime, end: datetime | None) -> str:
    if end is None:
        return "running"
    seconds = (end - start).total_seconds()
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    if seconds < 10:
        return f"{seconds:.1f}s"
    return span(end - start)


def when(value: datetime | None, now: datetime) -> str:
    """A UTC time, with the date only when it is not today's: '02:15', '11-27 02:00'.

    Seconds show when the time has them (slots of second-level schedules, as in the demo).
    """
    if value is None:
        return "-"
    clock = "%H:%M:%S" if value.second else "%H:%M"
    if value.date() == now.date():
        return value.strftime(clock)
    return value.strftime(f"%m-%d {clock}")


def seconds(value: float) -> str:
    return f"{value:g}s" if value < 60 else span(timedelta(seconds=value))
