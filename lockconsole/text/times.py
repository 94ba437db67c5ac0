"""Every text lockconsole shows for an age, a duration or a time: the CLI and the console share
these (no Textual, no Rich, no I/O).

- ages and table columns, fixed width: `age`, `span`, `duration`, `seconds`;
- a run's length in its detail and timeline: `took` (12ms, 4.2s, 10m12s, 2h05m);
- a duration inside a sentence, as an operator reads it: `reading` (1.5s, 1m30s, 2h13m, 3d4h);
- a time: `when` (a short clock, the date only when not today), `stamp` (a full UTC timestamp).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def age(since: datetime | None, now: datetime) -> str:
    """How long ago `since` was: 42s, 14m, 2h03m, 3d04h; '-' when unknown."""
    if since is None:
        return "-"
    return span(now - since)


def span(delta: timedelta) -> str:
    """A compact duration, never wider than 6 cells: 42s, 14m, 2h03m, 3d04h."""
    seconds = max(0, int(delta.total_seconds()))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


def duration(start: datetime, end: datetime | None) -> str:
    """From `start` to `end`, compact: 12ms, 4.2s, then as `span`; 'running' without an end."""
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
    """A configured number of seconds: 0.5s, 30s, then as `span`."""
    return f"{value:g}s" if value < 60 else span(timedelta(seconds=value))


def stamp(
    value: datetime | None, *, seconds: bool = True, ms: bool = False, zone: bool = True
) -> str:
    """A timestamp in UTC, as operators compare them across hosts: '2026-11-27 02:00:00 UTC'.

    `seconds=False` drops the seconds, `ms=True` adds milliseconds, `zone=False` drops ' UTC'
    (for a table whose title says it); '—' when unknown.
    """
    if value is None:
        return "—"
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    if ms:
        text = value.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    else:
        text = value.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")
    return f"{text} UTC" if zone else text


def took(delta: timedelta | None) -> str:
    """A run's length, to the tenth of a second below a minute: 12ms, 4.2s, 10m12s, 2h05m."""
    if delta is None:
        return "—"
    total = delta.total_seconds()
    if total < 1:
        return f"{total * 1000:.0f}ms"
    if total < 60:
        return f"{total:.1f}s"
    minutes, secs = divmod(int(total), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def reading(value: timedelta) -> str:
    """A duration inside a sentence, as an operator reads it: 2h13m, 14m, 1m30s, 1.5s, 3d4h."""
    total_seconds = value.total_seconds()
    if total_seconds < 10:
        return f"{max(total_seconds, 0):.1f}".rstrip("0").rstrip(".") + "s"
    total = int(total_seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h{minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"
