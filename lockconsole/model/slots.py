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


# @-macros whose minute and hour are fixed: on a fall-back night they fire once, like `0 0 * * *`
_FIXED_MACROS = frozenset({"@daily", "@midnight", "@weekly", "@monthly", "@yearly", "@annually"})


def repeats_wall_time(schedule: str, timezone: str, fire: datetime) -> bool:
    """True for a firing that cron does not make: the second occurrence of a wall time.

    On a fall-back night (01:00-02:00 twice in New York) a schedule at a fixed time of day,
    `30 1 * * *`, fires at the first 01:30 only, as cronie does; one with `*` in its minute or
    hour field (`*/15 * * * *`, `0 * * * *`) keeps its interval and fires in both hours. On a
    spring-forward night a time that does not exist fires once, at the first valid time after
    it (croniter's own rule, kept).
    """
    if timezone in cron.UTC_NAMES:
        return False
    local = fire.astimezone(ZoneInfo(timezone))
    if local.fold == 0 or local.replace(fold=0).utcoffset() == local.utcoffset():
        return False  # not the repeated hour's second pass
    fields = schedule.split()
    if fields and fields[0].startswith("@"):
        return fields[0].lower() in _FIXED_MACROS
    # minute and hour lead (croniter's optional seconds field comes sixth, after the weekday)
    return len(fields) >= 2 and not (fields[0].startswith("*") or fields[1].startswith("*"))


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
        back = _cron(schedule, timezone, second + timedelta(seconds=1))
        prev = back.get_prev(datetime).astimezone(UTC)
        while repeats_wall_time(schedule, timezone, prev):
            prev = back.get_prev(datetime).astimezone(UTC)
        nxt = _next_real(_cron(schedule, timezone, prev), schedule, timezone)
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
    return _next_real(fallback, job.schedule, job.timezone)


def _next_real(it: _Cron, schedule: str, timezone: str) -> datetime:
    """The iterator's next firing (UTC) that cron really makes (see repeats_wall_time)."""
    fire = it.get_next(datetime).astimezone(UTC)
    while repeats_wall_time(schedule, timezone, fire):
        fire = it.get_next(datetime).astimezone(UTC)
    return fire


def manual_slot(at: datetime) -> datetime:
    """A manual run's own slot: its start time, to the microsecond."""
    return at.astimezone(UTC)


def is_firing(job: Job, slot: datetime) -> bool:
    """Whether `slot` is a firing of the job's schedule that cron really makes."""
    if not job.schedule:
        return False
    return next_fire(job, slot - timedelta(microseconds=1)) == slot.astimezone(UTC)
