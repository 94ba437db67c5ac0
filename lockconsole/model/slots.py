"""Slots: the schedule firing an attempt belongs to, so instances that fire at 02:00:00.3 and
02:00:01.2 (or a little early, at 01:59:59.8) share one slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

from lockconsole.model import cron
from lockconsole.model.jobs import Job

MAX_EARLY = timedelta(seconds=30)  # an attempt this close before a firing belongs to that firing
_WINDOWS: dict[tuple[str, str], tuple[datetime, datetime]] = {}  # last firings found, by schedule


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Cron(Protocol):
    """The part of croniter's iterator used here."""

    def get_prev(self, ret_type: type[datetime]) -> datetime: ...

    def get_next(self, ret_type: type[datetime]) -> datetime: ...


def _cron(schedule: str, timezone: str, base: datetime) -> _Cron:
    from croniter import croniter

    cron: _Cron = croniter(schedule, base.astimezone(ZoneInfo(timezone)))
    return cron


def slot_for(job: Job, at: datetime) -> datetime:
    """The slot (a firing time, UTC) of an attempt made at `at`.

    The latest firing at or before `at`, unless the next firing is nearer than
    min(30 s, a quarter of the interval): then that next one (the instance's clock is early).
    Without a schedule the slot is the UTC minute of `at`.
    """
    at = at.astimezone(UTC)
    if not job.schedule:
        return at.replace(second=0, microsecond=0)
    prev, nxt = _firings_around(job.schedule, job.timezone, at.replace(microsecond=0))
    tolerance = min(MAX_EARLY, (nxt - prev) / 4)
    return nxt if nxt - at <= tolerance else prev


def _firings_around(schedule: str, timezone: str, second: datetime) -> tuple[datetime, datetime]:
    """The latest firing at or before `second` and the one after it (UTC).

    Parsing a cron expression costs more than a lock round trip, so the last pair found for each
    schedule is kept: any `second` between them has the same pair.
    """
    key = (schedule, timezone)
    window = _WINDOWS.get(key)
    if window is not None and window[0] <= second < window[1]:
        return window
    plain = cron.parse(schedule, timezone)  # no croniter import for plain UTC schedules
    found = plain.prev(second) if plain is not None else None
    if plain is not None and found is not None and (after := plain.next(found)) is not None:
        prev, nxt = found, after
    else:
        prev = _cron(schedule, timezone, second + timedelta(seconds=1)).get_prev(datetime)
        prev = prev.astimezone(UTC)
        nxt = _cron(schedule, timezone, prev).get_next(datetime).astimezone(UTC)
    if len(_WINDOWS) > 1024:  # schedules come from config files: a bound, not a policy
        _WINDOWS.clear()
    _WINDOWS[key] = (prev, nxt)
    return prev, nxt


def next_fire(job: Job, after: datetime) -> datetime | None:
    """The first firing strictly after `after` (UTC), or None for a job without a schedule."""
    if not job.schedule:
        return None
    plain = cron.parse(job.schedule, job.timezone)
    found = plain.next(after) if plain is not None else None
    if found is not None:
        return found
    fallback = _cron(job.schedule, job.timezone, after.astimezone(UTC))
    return fallback.get_next(datetime).astimezone(UTC)


def manual_slot(at: datetime) -> datetime:
    """A manual run's own slot: its start time, to the microsecond."""
    return at.astimezone(UTC)
