"""Schedules across daylight-saving changes fire like cron (cronie's rule), in America/New_York:

- fall back (2026-11-01, 01:00-02:00 twice): a job at a fixed time, `30 1 * * *`, fires at the
  first 01:30 only (05:30 UTC), and `check` does not call the second 01:30 (06:30 UTC) missed; a
  job with `*` in its minute or hour field keeps its interval and fires in both hours;
- spring forward (2026-03-08, 02:00-03:00 missing): `30 2 * * *` fires once, at 03:00 EDT
  (07:00 UTC), the first valid time after it.

Shown for `schedule` on a fast clock (a real PostgreSQL ledger) and for `run` fired from cron at
the two wall-clock instants, with the process's clock set there by the clock shim."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config
from lockconsole.console.snapshot.reports import firings, slot_reports
from lockconsole.engine.scheduler import Scheduler
from lockconsole.model.jobs import Job, LockKey
from lockconsole.model.slots import next_fire, repeats_wall_time, slot_for

from tests.support.settings import CLOCKSHIM

NY = "America/New_York"
FALL_FIRST = datetime(2026, 11, 1, 5, 30, tzinfo=UTC)  # 01:30 EDT
FALL_SECOND = datetime(2026, 11, 1, 6, 30, tzinfo=UTC)  # 01:30 EST, an hour later
SPRING = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)  # 03:00 EDT: 02:30 does not exist that night


def job(schedule: str) -> Job:
    return Job("dst", "main", "pg-session", LockKey("int64", 1), schedule=schedule, timezone=NY)


def firings_between(j: Job, start: datetime, end: datetime) -> list[datetime]:
    out, at = [], start
    while (fire := next_fire(j, at)) is not None and fire <= end:
        out.append(fire)
        at = fire
    return out


def test_a_fixed_time_fires_once_on_the_fall_back_night() -> None:
    daily = job("30 1 * * *")
    night = firings_between(
        daily, datetime(2026, 10, 31, 12, tzinfo=UTC), datetime(2026, 11, 2, 12, tzinfo=UTC)
    )
    assert night == [FALL_FIRST, datetime(2026, 11, 2, 6, 30, tzinfo=UTC)]
    assert repeats_wall_time(daily.schedule or "", NY, FALL_SECOND)
    # a runner fired at the second 01:30 (by a cron that does fire twice) joins the first slot
    assert slot_for(daily, FALL_SECOND + timedelta(seconds=2)) == FALL_FIRST
    assert list(
        firings(daily, FALL_FIRST - timedelta(hours=1), FALL_SECOND + timedelta(hours=1), 10)
    ) == [FALL_FIRST]
    six_fields = job("30 1 * * * 15")  # with croniter's seconds field (sixth): the same rule
    assert next_fire(six_fields, FALL_FIRST + timedelta(seconds=15)) == datetime(
        2026, 11, 2, 6, 30, 15, tzinfo=UTC
    )


def test_an_interval_keeps_firing_through_the_repeated_hour() -> None:
    hourly = job("0 * * * *")
    hours = firings_between(
        hourly, datetime(2026, 11, 1, 4, 30, tzinfo=UTC), datetime(2026, 11, 1, 7, 30, tzinfo=UTC)
    )
    assert hours == [datetime(2026, 11, 1, h, tzinfo=UTC) for h in (5, 6, 7)]  # 01:00 twice, 02:00
    quarter = job("*/15 1 * * *")  # `*` in the minute field: an interval within the hour
    assert (
        len(
            firings_between(
                quarter, FALL_FIRST - timedelta(hours=1), FALL_SECOND + timedelta(hours=1)
            )
        )
        == 8
    )
    assert not repeats_wall_time("30 1 * * *", "UTC", FALL_SECOND)


def test_a_missing_time_fires_once_at_the_first_valid_time() -> None:
    daily = job("30 2 * * *")
    night = firings_between(
        daily, datetime(2026, 3, 7, 12, tzinfo=UTC), datetime(2026, 3, 9, 12, tzinfo=UTC)
    )
    assert night == [SPRING, datetime(2026, 3, 9, 6, 30, tzinfo=UTC)]  # 03:00 EDT, then 02:30
    assert slot_for(daily, SPRING + timedelta(seconds=1)) == SPRING


def fast_clock(start: datetime, speed: float) -> Callable[[], datetime]:
    """A clock that starts at `start` and runs `speed` times as fast as the real one."""
    began = time.monotonic()
    return lambda: start + timedelta(seconds=(time.monotonic() - began) * speed)


@pytest.mark.parametrize(
    ("schedule", "start", "expected"),
    [
        (
            "30 1 * * *",
            FALL_FIRST - timedelta(hours=2),
            [FALL_FIRST, datetime(2026, 11, 2, 6, 30, tzinfo=UTC)],
        ),
        (
            "30 2 * * *",
            SPRING - timedelta(hours=2),
            [SPRING, datetime(2026, 3, 9, 6, 30, tzinfo=UTC)],
        ),
    ],
    ids=["fall-back", "spring-forward"],
)
def test_schedule_on_a_fast_clock_fires_each_night_once(
    schedule, start, expected, pg_url, uid
) -> None:
    name = f"dst_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.{name}]\nstrategy = "pg-session"\n'
        f'schedule = "{schedule}"\ntimezone = "{NY}"\ncommand = ["true"]\n',
        "<test>",
    )
    speed = 7200.0  # two hours a second: 31 hours take 15.5 s (the last firing 2 s before)
    scheduler = Scheduler(
        config, list(config.jobs.values()), instance="web-1", clock=fast_clock(start, speed)
    )
    thread = threading.Thread(target=scheduler.run_forever, args=(31 * 3600,), daemon=True)
    thread.start()
    thread.join(timeout=120)
    assert not thread.is_alive()
    with Ledger(config.ledger_for(config.job(name))) as ledger:
        runs = ledger.runs(name)
    assert sorted(r.slot for r in runs) == expected
    assert {r.outcome for r in runs} == {"succeeded"}
    end = start + timedelta(hours=31)
    reports = slot_reports(
        config.jobs.values(), runs, now=end, lookback=timedelta(days=3), grace=timedelta(minutes=5)
    )
    assert [(r.slot, r.status) for r in reports] == [(s, "ok") for s in reversed(expected)]


def run_at(
    config: Path, env: dict[str, str], at: datetime, *words: str
) -> subprocess.CompletedProcess[str]:
    """`lockconsole WORDS` in a process whose clock reads `at` (the clock shim)."""
    shift = (at - datetime.now(UTC)).total_seconds()
    shimmed = dict(
        env, PYTHONPATH=f"{CLOCKSHIM}:{env['PYTHONPATH']}", LOCKCONSOLE_TEST_CLOCK_SHIFT=str(shift)
    )
    return subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        capture_output=True, text=True, env=shimmed, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_run_from_cron_at_both_wall_times_runs_once_and_check_sees_no_miss(
    own_database, write_config, cli_env
) -> None:
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n'
        + "".join(
            f'[jobs.{name}]\nstrategy = "pg-session"\nschedule = "{schedule}"\n'
            f'timezone = "{NY}"\ncommand = ["true"]\n'
            for name, schedule in (("fall", "30 1 * * *"), ("spring", "30 2 * * *"))
        )
    )
    first = run_at(config, cli_env, FALL_FIRST + timedelta(seconds=3), "run", "fall", "--json")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["slot"].startswith("2026-11-01T05:30:00")
    # a cron that fires at the second 01:30 as well: the slot already ran, so this one skips
    again = run_at(config, cli_env, FALL_SECOND + timedelta(seconds=3), "run", "fall", "--json")
    assert again.returncode == 3, again.stderr
    assert json.loads(again.stdout)["slot"].startswith("2026-11-01T05:30:00")
    spring = run_at(config, cli_env, SPRING + timedelta(seconds=3), "run", "spring", "--json")
    assert spring.returncode == 0 and json.loads(spring.stdout)["slot"].startswith(
        "2026-03-08T07:00:00"
    )
    # check's judgment of those nights: the ledger's rows judged 4 hours after each (check
    # itself judges by the database's clock, which says December here)
    from lockconsole.config.loader import load_config

    loaded = load_config(str(config))
    with Ledger(loaded.databases["main"]) as ledger:
        runs = ledger.runs()
    for at, name in (
        (FALL_SECOND + timedelta(hours=4), "fall"),
        (SPRING + timedelta(hours=4), "spring"),
    ):
        mine = [r for r in runs if r.job == name]
        day = timedelta(days=1)
        reports = slot_reports(
            [loaded.job(name)], mine, now=at, lookback=day, grace=timedelta(minutes=5)
        )
        assert [r.status for r in reports] == ["ok"], (name, reports)


def test_the_shim_shifts_only_the_process_it_is_given(cli_env) -> None:
    """The clock shim itself: the shifted process reads the shifted time, isinstance still holds."""
    code = (
        "import datetime as d, time; n = d.datetime.now(d.UTC); "
        "print(n.isoformat(), isinstance(d.datetime.fromtimestamp(0), d.datetime), "
        "int(time.time()))"
    )
    env = dict(
        cli_env,
        PYTHONPATH=f"{CLOCKSHIM}:{cli_env['PYTHONPATH']}",
        LOCKCONSOLE_TEST_CLOCK_SHIFT="-86400",
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=30
    ).stdout.split()
    assert out[1] == "True"
    assert abs(int(out[2]) - (time.time() - 86400)) < 30
    assert (
        abs(
            (
                datetime.fromisoformat(out[0]) - (datetime.now(UTC) - timedelta(days=1))
            ).total_seconds()
        )
        < 30
    )
