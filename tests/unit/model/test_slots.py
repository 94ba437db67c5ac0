"""Slots: the cached firing window gives exactly what a fresh croniter computation gives."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from croniter import croniter

from lockconsole.model import slots
from lockconsole.model.jobs import Job
from lockconsole.model.keys import pg_key_for


def _job(schedule: str | None, timezone: str = "UTC") -> Job:
    key = pg_key_for("nightly", None)
    return Job(
        name="nightly",
        database="main",
        strategy="pg-session",
        key=key,
        schedule=schedule,
        timezone=timezone,
    )


def _reference(job: Job, at: datetime) -> datetime:
    """slot_for as its docstring states it, computed from scratch with croniter every time."""
    at = at.astimezone(UTC)
    zone = ZoneInfo(job.timezone)
    base = (at.replace(microsecond=0) + timedelta(seconds=1)).astimezone(zone)
    prev = croniter(job.schedule, base).get_prev(datetime).astimezone(UTC)
    nxt = croniter(job.schedule, prev.astimezone(zone)).get_next(datetime).astimezone(UTC)
    tolerance = min(slots.MAX_EARLY, (nxt - prev) / 4)
    return nxt if nxt - at <= tolerance else prev


@pytest.mark.parametrize(
    ("schedule", "timezone"),
    [
        ("0 2 * * *", "UTC"),
        ("*/5 * * * *", "UTC"),
        ("30 2 * * *", "Europe/Berlin"),
        ("0 * * * *", "America/New_York"),
        ("* * * * *", "UTC"),
    ],
)
def test_cached_windows_match_a_fresh_computation(schedule: str, timezone: str) -> None:
    job = _job(schedule, timezone)
    rng = random.Random(f"{schedule}|{timezone}")
    start = datetime(2026, 3, 27, tzinfo=UTC)  # spans the European and US clock changes
    times = sorted(start + timedelta(seconds=rng.uniform(0, 10 * 86400)) for _ in range(400))
    times += [t.replace(second=59, microsecond=999_999) for t in times[:50]]
    rng.shuffle(times[-150:])  # also back and forth in time, across cached windows
    slots._WINDOWS.clear()
    for at in times:
        assert slots.slot_for(job, at) == _reference(job, at), at.isoformat()


def test_an_early_clock_joins_the_next_slot_and_a_late_one_keeps_its_own() -> None:
    job = _job("0 2 * * *")
    two = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    slots.slot_for(job, two + timedelta(hours=3))  # fill the cache with the 02:00 window
    assert slots.slot_for(job, two - timedelta(seconds=0.2)) == two
    assert slots.slot_for(job, two - timedelta(seconds=31)) == two - timedelta(days=1)
    assert slots.slot_for(job, two + timedelta(seconds=1.2)) == two


def test_two_schedules_do_not_share_a_window() -> None:
    at = datetime(2026, 11, 29, 2, 7, 30, tzinfo=UTC)
    assert slots.slot_for(_job("*/5 * * * *"), at) == at.replace(minute=5, second=0)
    assert slots.slot_for(_job("0 2 * * *"), at) == at.replace(minute=0, second=0)
    assert slots.slot_for(_job("0 2 * * *", "Europe/Berlin"), at) == datetime(
        2026, 11, 29, 1, 0, tzinfo=UTC
    )


def test_no_schedule_means_the_utc_minute() -> None:
    at = datetime(2026, 11, 29, 2, 7, 30, 5, tzinfo=UTC)
    assert slots.slot_for(_job(None), at) == datetime(2026, 11, 29, 2, 7, tzinfo=UTC)


def test_evolve_matches_dataclasses_replace_and_refuses_unknown_fields() -> None:
    import dataclasses

    from lockconsole.model.jobs import Run, evolve

    at = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    run = Run(
        job="nightly",
        slot=at,
        instance="web-1",
        host="h",
        pid=1,
        trigger="scheduled",
        outcome="skipped",
        started_at=at,
    )
    changed = evolve(run, outcome="acquired", session_id=42)
    assert changed == dataclasses.replace(run, outcome="acquired", session_id=42)
    assert run.outcome == "skipped"  # the original is untouched
    with pytest.raises(TypeError, match="no field"):
        evolve(run, outcom="acquired")
