"""Slots: the schedule firing an attempt belongs to, so instances that fire at 02:00:00.3 and
02:00:01.2 (or a little early, at 01:59:59.8) share one slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from .models import Job

MAX_EARLY = timedelta(seconds=30)  # an attempt this close before a firing belongs to that firing


def utcnow() -> datetime:
    return datetime.now(UTC)


def _cron(job: Job, base: datetime):  # type: ignore[no-untyped-def]
    from croniter import croniter

    return croniter(job.schedule, base.astimezone(ZoneInfo(job.timezone)))


def slot_for(job: Job, at: datetime) -> datetime:
    """The slot (a firing time, UTC) of an attempt made at `at`.

    The latest firing at or before `at`, unless the next firing is nearer than
    min(30 s, a quarter of the interval): then that next one (the instance's clock is early).
    Without a schedule the slot is the UTC minute of `at`.
    """
    at = at.astimezone(UTC)
    if not job.schedule:
        return at.replace(second=0, microsecond=0)
    base = at.replace(microsecond=0) + timedelta(seconds=1)
    prev = _cron(job, base).get_prev(datetime).astimezone(UTC)
    nxt = _cron(job, prev).get_next(datetime).astimezone(UTC)
    tolerance = min(MAX_EARLY, (nxt - prev) / 4)
    return nxt if nxt - at <= tolerance else prev


def next_fire(job: Job, after: datetime) -> datetime | None:
    """The first firing strictly after `after` (UTC), or None for a job without a schedule."""
    if not job.schedule:
        return None
    return _cron(job, after.astimezone(UTC)).get_next(datetime).astimezone(UTC)


def manual_slot(at: datetime) -> datetime:
    """A manual run's own slot: its start time, to the microsecond."""
    return at.astimezone(UTC)
