"""Every text lockconsole shows for an age, a duration or a time: the CLI and the console share
these (no Textual, no Rich, no I/O).

One duration format, `span`, never wider than 6 cells, for ages, run lengths, settings and
durations inside sentences alike: 340ms, 4.2s, 42s, 14m05s, 2h03m, 3d04h. `age`, `duration`,
`took`, `reading` and `seconds` are that format for what they are given.

One time format: `clock` (HH:MM:SS, with MM-DD before it when not today) and `stamp` (the full
YYYY-MM-DD HH:MM:SS). Both always keep the seconds, so slots seconds apart never look alike.
Times are shown in one zone (UTC, or the console's `[console] timezone`), named once on screen
(`zone_label`) rather than after every time.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo


def span(delta: timedelta) -> str:
    """The duration format: 0s, 340ms, 4.2s, 42s, 14m05s, 2h03m, 3d04h (negative reads as 0s)."""
    total = max(0.0, delta.total_seconds())
    if total == 0:
        return "0s"
    if total < 1:
        return f"{total * 1000:.0f}ms"
    if total < 10:
        return f"{total:.1f}".removesuffix(".0") + "s"
    whole = int(total)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def age(since: datetime | None, now: datetime) -> str:
    """How long ago `since` was, as `span`; '-' when unknown."""
    if since is None:
        return "-"
    return span(now - since)


def duration(start: datetime, end: datetime | None) -> str:
    """From `start` to `end` as `span`; 'running' without an end."""
    if end is None:
        return "running"
    return span(end - start)


def took(delta: timedelta | None) -> str:
    """A run's length as `span`; '—' when unknown."""
    return "—" if delta is None else span(delta)


def reading(value: timedelta) -> str:
    """A duration inside a sentence: the same format as everywhere (`span`)."""
    return span(value)


def seconds(value: float) -> str:
    """A configured number of seconds, as `span`: 500ms, 2s, 30s, 5m00s."""
    return span(timedelta(seconds=value))


def _local(value: datetime, zone: tzinfo | None) -> datetime:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(zone or UTC)


def clock(value: datetime | None, now: datetime, zone: tzinfo | None = None) -> str:
    """A time in `zone` (UTC by default): '02:15:00', or '11-27 02:15:00' when not today."""
    if value is None:
        return "-"
    local = _local(value, zone)
    if local.date() == _local(now, zone).date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%m-%d %H:%M:%S")


when = clock  # the name the panes have always used


def stamp(
    value: datetime | None, *, ms: bool = False, zone: bool = True, tz: tzinfo | None = None
) -> str:
    """A full timestamp: '2026-11-27 02:00:00 UTC' (in `tz`, UTC by default).

    `ms=True` adds milliseconds, `zone=False` drops the zone's name (for a table or a screen
    that names it once); '—' when unknown.
    """
    if value is None:
        return "—"
    local = _local(value, tz)
    text = local.strftime("%Y-%m-%d %H:%M:%S")
    if ms:
        text += f".{local.microsecond // 1000:03d}"
    return f"{text} {zone_label(tz)}" if zone else text


def zone_label(zone: tzinfo | None) -> str:
    """The zone's name as shown once on screen: 'UTC', 'Europe/Berlin'."""
    if zone is None or zone is UTC:
        return "UTC"
    return str(getattr(zone, "key", None) or zone)
