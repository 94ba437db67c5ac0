"""A production-sized ledger: every slot over the whole lookback judged by the ledger itself.

Two ledgers of their own, PostgreSQL and MariaDB, are filled in bulk (INSERT … SELECT over
generate_series / seq_1_to_N): per-minute jobs on three instances for two days, a five-minute
job and a nightly job, with one true miss deep in the lookback on each, a slot nobody attempted,
a double run and a retried failure. The two ledgers' run ids collide (both count from 1).
`check`, `check --json`, the console's snapshot (jobs, slots, alerts) and the metrics must agree
with a plain SQL count of the same rows, whatever the history page's limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.metrics.figures import figures
from lockconsole.model.jobs import Database

from tests.support.helpers import mysql_connect

PER_MINUTE = 8  # per-minute jobs in each ledger
HOURS = 48  # history, twice the lookback
LOOKBACK = timedelta(days=1)


@dataclass
class Filled:
    """One filled ledger: its URL, its jobs' prefix and the slots planted in it."""

    url: str
    prefix: str
    end: datetime  # the newest per-minute slot
    missed_skipped: tuple[str, datetime]  # every instance skipped it
    missed_absent: tuple[str, datetime]  # nobody attempted it
    double: tuple[str, datetime]
    retried: tuple[str, datetime]


def _minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _plant(prefix: str, end: datetime) -> dict[str, tuple[str, datetime]]:
    return {
        "missed_skipped": (f"{prefix}m07", end - timedelta(hours=10, minutes=7)),
        "missed_absent": (f"{prefix}m03", end - timedelta(hours=20, minutes=3)),
        "double": (f"{prefix}m05", end - timedelta(hours=15, minutes=5)),
        "retried": (f"{prefix}m02", end - timedelta(hours=5, minutes=2)),
    }


def _fill_pg(url: str, prefix: str) -> Filled:
    Ledger(Database("main", parse_url(url))).create_schema()
    with psycopg.connect(url, autocommit=True) as conn:
        [[now]] = conn.execute("select now()").fetchall()
        end = _minute(now.astimezone(UTC)) - timedelta(minutes=1)
        start = end - timedelta(hours=HOURS)
        rows = """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at, exit_code)
            select %(prefix)s || %(kind)s || lpad(j::text, 2, '0'), s, 'web-' || i, 'host-' || i,
                   100 + i, 'scheduled',
                   case when i = 1 + ((extract(epoch from s)::bigint / 60 + j) %% 3)
                        then 'succeeded' else 'skipped' end,
                   s + i * interval '10 milliseconds',
                   s + i * interval '10 milliseconds'
                     + case when i = 1 + ((extract(epoch from s)::bigint / 60 + j) %% 3)
                            then interval '2 seconds' else interval '0' end,
                   0
            from generate_series(1, %(jobs)s) j,
                 generate_series(%(start)s::timestamptz, %(end)s::timestamptz, %(step)s) s,
                 generate_series(1, 3) i
        """
        conn.execute(rows, dict(prefix=prefix, kind="m", jobs=PER_MINUTE, start=start, end=end,
                                step=timedelta(minutes=1)))  # fmt: skip
        five = start + timedelta(minutes=(-start.minute) % 5)
        conn.execute(rows, dict(prefix=prefix, kind="f", jobs=1, start=five, end=end,
                                step=timedelta(minutes=5)))  # fmt: skip
        night = start.replace(hour=2, minute=0) + timedelta(days=1)
        conn.execute(rows, dict(prefix=prefix, kind="n", jobs=1, start=night, end=end,
                                step=timedelta(days=1)))  # fmt: skip
        planted = _plant(prefix, end)
        _plant_sql(conn, planted, "%s")
    return Filled(url, prefix, end, **planted)


def _fill_mysql(url: str, prefix: str) -> Filled:
    Ledger(Database("main", parse_url(url))).create_schema()
    conn = mysql_connect(url)
    with conn.cursor() as cur:
        cur.execute("select utc_timestamp(6)")
        [(now,)] = cur.fetchall()
        end = _minute(now.replace(tzinfo=UTC)) - timedelta(minutes=1)
        start = end - timedelta(hours=HOURS)
        rows = """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, `trigger`, outcome, started_at, finished_at,
               exit_code)
            select concat(%(prefix)s, %(kind)s, lpad(j.seq, 2, '0')), s.at, concat('web-', i.seq),
                   concat('host-', i.seq), 100 + i.seq, 'scheduled',
                   if(i.seq = 1 + ((floor(unix_timestamp(s.at) / 60) + j.seq) %% 3),
                      'succeeded', 'skipped'),
                   s.at + interval (i.seq * 10000) microsecond,
                   s.at + interval (i.seq * 10000) microsecond
                     + interval if(i.seq = 1 + ((floor(unix_timestamp(s.at) / 60) + j.seq) %% 3),
                                   2, 0) second,
                   0
            from seq_1_to_{jobs} j,
                 (select %(start)s + interval (seq * {step}) minute as at
                  from seq_0_to_{count}) s,
                 seq_1_to_3 i
        """
        cur.execute("set time_zone = '+00:00'")  # unix_timestamp() of a naive UTC datetime

        def fill(kind: str, jobs: int, first: datetime, step: int) -> None:
            count = int((end - first).total_seconds() // 60 // step)
            sql = rows.format(jobs=jobs, step=step, count=count)
            cur.execute(sql, dict(prefix=prefix, kind=kind, start=first.replace(tzinfo=None)))

        fill("m", PER_MINUTE, start, 1)
        fill("f", 1, start + timedelta(minutes=(-start.minute) % 5), 5)
        fill("n", 1, start.replace(hour=2, minute=0) + timedelta(days=1), 24 * 60)
        planted = _plant(prefix, end)
        _plant_sql(cur, planted, "%s", naive=True)
    conn.commit()
    conn.close()
    return Filled(url, prefix, end, **planted)


def _plant_sql(
    cur: Any, planted: dict[str, tuple[str, datetime]], p: str, naive: bool = False
) -> None:
    """The planted slots: a miss every instance skipped, a slot nobody attempted, a double run
    (two executions that overlap) and a failure retried by the next instance."""

    def at(when: datetime) -> datetime:
        return when.replace(tzinfo=None) if naive else when

    job, slot = planted["missed_skipped"]
    cur.execute(f"update lockconsole_runs set outcome = 'skipped' where job = {p} and slot = {p}",
                (job, at(slot)))  # fmt: skip
    job, slot = planted["missed_absent"]
    cur.execute(f"delete from lockconsole_runs where job = {p} and slot = {p}", (job, at(slot)))
    job, slot = planted["double"]
    cur.execute(
        f"update lockconsole_runs set outcome = 'succeeded', finished_at = {p} "
        f"where job = {p} and slot = {p}",
        (at(slot + timedelta(seconds=3)), job, at(slot)),
    )
    job, slot = planted["retried"]
    cur.execute(
        f"update lockconsole_runs set outcome = case when instance = 'web-1' then 'failed' "
        f"when instance = 'web-2' then 'succeeded' else 'skipped' end, "
        f"started_at = case when instance = 'web-2' then {p} else started_at end, "
        f"finished_at = case when instance = 'web-2' then {p} else {p} end "
        f"where job = {p} and slot = {p}",
        (at(slot + timedelta(seconds=5)), at(slot + timedelta(seconds=6)),
         at(slot + timedelta(seconds=1)), job, at(slot)),
    )  # fmt: skip


@pytest.fixture
def filled(own_database: str, fresh_mysql: str) -> Iterator[tuple[Filled, Filled]]:
    yield _fill_pg(own_database, "p"), _fill_mysql(fresh_mysql, "y")


def _config_text(both: tuple[Filled, Filled]) -> str:
    lines = ["[console]", 'lookback = "1d"', 'grace = "5m"', "history_limit = 500"]
    for name, f in zip(("pg", "my"), both, strict=True):
        lines += [f"[databases.{name}]", f"url = {json.dumps(f.url)}"]
        jobs = [(f"{f.prefix}m{j:02d}", "* * * * *") for j in range(1, PER_MINUTE + 1)]
        jobs += [(f"{f.prefix}f01", "*/5 * * * *"), (f"{f.prefix}n01", "0 2 * * *")]
        for job, schedule in jobs:
            strategy = "pg-session" if name == "pg" else "mysql"
            lines += [f"[jobs.{job}]", f'database = "{name}"', f'schedule = "{schedule}"',
                      f'strategy = "{strategy}"', 'command = ["true"]']  # fmt: skip
    return "\n".join(lines) + "\n"


def _sql_slots(f: Filled, since: datetime) -> Counter[str]:
    """Per job: the distinct slots the ledger holds at or after `since` (plain SQL)."""
    query = "select job, count(distinct slot) from lockconsole_runs where slot >= %s group by job"
    if f.url.startswith("postgresql"):
        with psycopg.connect(f.url) as conn:
            return Counter(dict(conn.execute(query, (since,)).fetchall()))
    conn = mysql_connect(f.url)
    with conn.cursor() as cur:
        cur.execute(query, (since.replace(tzinfo=None),))
        found = Counter({job: int(n) for job, n in cur.fetchall()})
    conn.close()
    return found


def _sql_attempts(f: Filled, job: str, since: datetime) -> dict[tuple[str, str], int]:
    """(outcome, instance) -> attempts of `job` with a slot at or after `since` (plain SQL)."""
    query = (
        "select outcome, instance, count(*) from lockconsole_runs where job = %s and slot >= %s "
        "group by outcome, instance"
    )
    if f.url.startswith("postgresql"):
        with psycopg.connect(f.url) as conn:
            rows = conn.execute(query, (job, since)).fetchall()
    else:
        conn = mysql_connect(f.url)
        with conn.cursor() as cur:
            cur.execute(query, (job, since.replace(tzinfo=None)))
            rows = cur.fetchall()
        conn.close()
    return {(outcome, instance): int(n) for outcome, instance, n in rows}


def _expected_alerts(both: tuple[Filled, Filled]) -> set[tuple[str, str, datetime]]:
    expected = set()
    for f in both:
        expected |= {
            ("missed", *f.missed_skipped),
            ("missed", *f.missed_absent),
            ("double_run", *f.double),
            ("overlap", *f.double),
        }
    return expected


def test_every_slot_of_two_filled_ledgers_is_judged_and_agrees_with_sql(
    filled: tuple[Filled, Filled], write_config, cli_env
) -> None:
    config_path = write_config(_config_text(filled))
    config = load_config(config_path)
    with Console(config, read_only=True) as console:
        snap = console.snapshot(duplicates=False)
    assert snap.errors == ()
    found = {(a.kind, a.job, a.slot) for a in snap.alerts if a.slot is not None}
    assert found == _expected_alerts(filled), "exactly the planted alerts, none at an edge"

    since = snap.taken_at - LOOKBACK
    per_job = Counter(r.job for r in snap.slots)
    for f in filled:
        held = _sql_slots(f, since)
        for job in [j for j in config.jobs if j.startswith(f.prefix)]:
            absent = 1 if job == f.missed_absent[0] else 0  # a firing with no row at all
            assert per_job[job] == held[job] + absent, job
    statuses = {(r.job, r.slot): r.status for r in snap.slots}
    for f in filled:
        assert statuses[f.retried] == "retried"
        assert statuses[f.double] == "double_run"
        assert statuses[f.missed_skipped] == statuses[f.missed_absent] == "missed"
    # 24 hours of per-minute slots in the lookback, far beyond the page of 500 attempts
    assert len(snap.runs) < 1100 and len(snap.slots) > 2 * PER_MINUTE * 24 * 60

    # the nightly job's last run stays right next to jobs that run every minute
    nightly = {s.job.name: s for s in snap.jobs}
    for f in filled:
        last = nightly[f"{f.prefix}n01"].last_run
        assert last is not None and last.slot.hour == 2 and last.slot.minute == 0
        assert f.end - last.slot < timedelta(days=1)

    # the metrics count the same slots
    slot_figure = next(fig for fig in figures(snap, config, 0.0) if fig.name == "job_slots")
    by_status = {labels: value for labels, value in slot_figure.samples}
    for f in filled:
        assert by_status[(f.missed_absent[0], "missed")] == 1
        assert by_status[(f.double[0], "double_run")] == 1
        assert by_status[(f.retried[0], "retried")] == 1
        ok = by_status[(f"{f.prefix}m01", "ok")]
        assert ok == _sql_slots(f, since)[f"{f.prefix}m01"] - sum(
            1 for (job, _), status in statuses.items() if job == f"{f.prefix}m01" and status != "ok"
        )

    # the metrics count every attempt of the lookback, as plain SQL does
    attempt_figure = next(fig for fig in figures(snap, config, 0.0) if fig.name == "job_attempts")
    counted = {labels: value for labels, value in attempt_figure.samples}
    for f in filled:
        job = f"{f.prefix}m04"
        assert {k[1:]: v for k, v in counted.items() if k[0] == job} == _sql_attempts(f, job, since)

    # check and check --json say the same, through the real CLI
    env = dict(cli_env)
    text = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config_path), "check",
         "--no-duplicates", "-o", "tsv", "--no-headers"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert text.returncode == 1, text.stderr
    kinds = [line.split("\t")[0] for line in text.stdout.splitlines()]
    assert sorted(k for k in kinds if k in ("missed", "double_run", "overlap")) == sorted(
        kind for kind, _, _ in _expected_alerts(filled)
    ), text.stdout
    out = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config_path), "check",
         "--no-duplicates", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    got = {
        (a["kind"], a["job"], datetime.fromisoformat(a["slot"]))
        for a in doc["alerts"]
        if a.get("slot")
    }
    assert got == _expected_alerts(filled)
