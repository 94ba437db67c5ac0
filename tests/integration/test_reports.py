"""Slot reports, alerts and stale holders.

Every alert kind is produced by a real race or fault: real `lockconsole run` processes (or the
real runner through `run_once`) against the real PostgreSQL, then the ledger is read and fed to
`slot_reports` / `mark_stale` / `alerts`. Crafted-row tests pin the edge cases after that.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from lockconsole.backends import sqlfiles
from lockconsole.config.loader import Config, load_config
from lockconsole.console.snapshot.reports import alerts, firings, format_slot, slot_reports
from lockconsole.console.snapshot.stale import ORPHANED, mark_stale
from lockconsole.model.jobs import Idempotency, Job, LockKey, Run
from lockconsole.model.slots import slot_for, utcnow
from lockconsole.model.views import Holder
from lockconsole.text.times import stamp

from tests.support.config import job_toml
from tests.support.helpers import wait_for
from tests.support.runner_helpers import lockconsole, runs_of
from tests.support.settings import PYTHON

DAY = timedelta(days=1)
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)

INSERT_INVOICES = (
    "import sys, psycopg; from psycopg import sql\n"
    "with psycopg.connect(sys.argv[1], autocommit=True) as c:\n"
    "    c.execute(sql.SQL('INSERT INTO {} (tenant_id, period, amount) "
    "SELECT t, %s, 100 FROM generate_series(1, 3) t').format(sql.Identifier(sys.argv[2])),"
    " ('2026-11',))\n"
)


# -- helpers ----------------------------------------------------------------------------------


def job_config(url: str, job: str, *, strategy: str = "pg-session", **extra: Any) -> str:
    """A one-job config (schedule "0 2 * * *" unless given); extra keys as TOML values."""
    return job_toml(url, job, strategy=strategy, **extra)


def run_job(config: Path, job: str, *args: str, env: dict[str, str]) -> int:
    """One `lockconsole run` process, waited for; its exit code."""
    proc = lockconsole(config, "run", job, *args, env=env)
    code = proc.wait(timeout=60)
    proc.communicate()
    return code


def last_0200(job: Job) -> str:
    """The slot of "0 2 * * *" an attempt now belongs to, as --slot takes it."""
    return slot_for(job, utcnow()).isoformat()


def report_now(config: Path, job: str, **kwargs: Any) -> list[Any]:
    """Slot reports of `job` from the real ledger, now."""
    cfg = load_config(str(config))
    kwargs.setdefault("lookback", DAY)
    kwargs.setdefault("grace", MINUTE)
    return slot_reports([cfg.job(job)], runs_of(config, job), now=utcnow(), **kwargs)


def holder_of(conn: Any, config: Config, job: Job) -> tuple[Holder, datetime] | None:
    """The granted holder of `job`'s key (PgInspector, from pg_locks) and the server's now."""
    from lockconsole.backends.postgres.inspect import PgInspector

    inspector = PgInspector(config.database_for(job))
    try:
        listed = inspector.holders([job]).holders
    finally:
        inspector.close()
    found = [h for h in listed if h.job == job.name and h.granted]
    if not found:
        return None
    [holder] = found
    return holder, conn.execute("SELECT clock_timestamp()").fetchone()[0]


@pytest.fixture
def setup(pg_url: str, uid: str, write_config: Callable[..., Path]) -> Callable[..., Any]:
    """setup(prefix, **job keys) -> (config path, Config, Job) for a job named prefix_uid."""

    def make(prefix: str, **extra: Any) -> tuple[Path, Config, Job]:
        name = f"{prefix}_{uid}"
        path = write_config(job_config(pg_url, name, **extra))
        cfg = load_config(str(path))
        return path, cfg, cfg.job(name)

    return make


@pytest.fixture
def plain_session(pg_url: str) -> Iterator[Any]:
    conn = psycopg.connect(pg_url, autocommit=True)
    yield conn
    conn.close()


# -- double run -------------------------------------------------------------------------------


def test_double_run_without_slot_guard(setup, cli_env):
    """Three instances, one after the other, same slot, no slot guard: a triple charge."""
    config, _, job = setup("nightly_billing", once_per_slot=False, command=["true"])
    slot = last_0200(job)
    for i in (1, 2, 3):
        assert run_job(config, job.name, "--instance", f"web-{i}", "--slot", slot, env=cli_env) == 0
    [report] = report_now(config, job.name)
    assert report.status == "double_run" and report.acquired == 3 and report.skipped == 0
    assert report.outcomes == (
        ("web-1", "succeeded"),
        ("web-2", "succeeded"),
        ("web-3", "succeeded"),
    )
    [alert] = alerts([report])
    assert alert.kind == "double_run" and alert.job == job.name and alert.slot == report.slot
    assert alert.message == (
        f"{job.name} {format_slot(report.slot)} ran on 3 instances: web-1, web-2, web-3"
    )


def test_slot_guard_keeps_the_slot_ok(setup, cli_env):
    """The same three runs with the slot guard on: one ran, two skipped, no alert."""
    config, _, job = setup("guarded", command=["true"])
    slot = last_0200(job)
    codes = [
        run_job(config, job.name, "--instance", f"web-{i}", "--slot", slot, env=cli_env)
        for i in (1, 2, 3)
    ]
    assert codes == [0, 3, 3]
    [report] = report_now(config, job.name)
    assert (report.status, report.acquired, report.skipped) == ("ok", 1, 2)
    assert alerts([report]) == []


def test_expired_lease_taken_over_is_a_double_run(setup, cli_env, uid, plain_session):
    """A lease outlives max_duration: a second instance takes it over in the same slot."""
    table = f"shedlock_{uid}"
    config, _, job = setup(
        "lease_job",
        strategy="lease",
        max_duration="1s",
        watchdog_interval=4,
        once_per_slot=False,
        lease_table=table,
    )
    slot = last_0200(job)
    first = lockconsole(
        config,
        "run",
        job.name,
        "--instance",
        "web-1",
        "--slot",
        slot,
        "--",
        "sleep",
        "10",
        env=cli_env,
    )
    expired = sql.SQL("SELECT lock_until <= now() FROM {} WHERE name = %s").format(
        sql.Identifier(table)
    )
    wait_for(lambda: [r for r in runs_of(config, job.name) if r.outcome == "acquired"])
    wait_for(lambda: plain_session.execute(expired, (job.key.value,)).fetchone()[0])
    second = run_job(
        config, job.name, "--instance", "web-2", "--slot", slot, "--", "true", env=cli_env
    )
    assert second == 0
    assert first.wait(timeout=30) == 4, first.communicate()[1]
    [report] = report_now(config, job.name)
    assert report.status == "double_run" and report.acquired == 2
    assert report.outcomes == (("web-1", "lock_lost"), ("web-2", "succeeded"))
    lost, took_over = sorted(runs_of(config, job.name), key=lambda r: r.started_at)
    assert lost.finished_at and took_over.started_at < lost.finished_at, "they overlapped"
    [alert, overlap] = alerts([report])
    assert overlap.kind == "overlap" and report.overlap > 0
    assert alert.message.endswith("ran on 2 instances: web-1 (lock_lost), web-2")


# -- missed -----------------------------------------------------------------------------------


def test_missed_slots_after_the_job_stops_running(setup, cli_env, plain_session):
    """Every 2 s: it ran once, then a stuck lock made every instance skip, then nobody ran it."""
    config, _, job = setup("every2s", schedule="* * * * * */2", command=["true"])
    assert run_job(config, job.name, "--instance", "web-1", env=cli_env) == 0
    [first_run] = runs_of(config, job.name)
    wait_for(lambda: utcnow() >= first_run.slot + timedelta(seconds=2))  # the next slot
    plain_session.execute("SELECT pg_advisory_lock(%s)", (job.key.value,))
    procs = [
        lockconsole(config, "run", job.name, "--instance", f"web-{i}", env=cli_env) for i in (2, 3)
    ]
    assert [p.wait(timeout=60) for p in procs] == [3, 3]
    plain_session.execute("SELECT pg_advisory_unlock(%s)", (job.key.value,))
    time.sleep(5)
    runs = runs_of(config, job.name)
    first = min(r.slot for r in runs)
    reports = report_now(config, job.name, grace=timedelta(seconds=1))
    assert [r.slot for r in reports] == sorted((r.slot for r in reports), reverse=True)
    assert min(r.slot for r in reports) == first, "nothing is missed before the first run"
    assert [r.status for r in reports if r.slot == first] == ["ok"]
    skipped = [r for r in reports if r.skipped]
    assert skipped and all(r.status == "missed" and r.acquired == 0 for r in skipped)
    silent = [r for r in reports if r.status == "missed" and not r.outcomes]
    assert len(silent) >= 1
    assert all(r.slot + timedelta(seconds=1) <= utcnow() for r in silent)
    found = alerts(reports)
    assert {a.kind for a in found} == {"missed"} and len(found) == len(skipped) + len(silent)
    messages = [a.message for a in found]
    assert any("did not run: every instance skipped it (web-" in m for m in messages)
    assert any(m.endswith("did not run: no instance attempted it") for m in messages)


# -- lock lost, failed ------------------------------------------------------------------------


def test_terminated_holder_session_is_lock_lost(setup, cli_env, plain_session, tmp_path):
    config, cfg, job = setup("terminated", watchdog_interval=0.3, stop_grace=2)
    started = tmp_path / "job-started"
    proc = lockconsole(
        config,
        "run",
        job.name,
        "--instance",
        "web-1",
        "--",
        "sh",
        "-c",
        f"touch {started}; exec sleep 30",
        env=cli_env,
    )
    # The session is ended once the job runs: the lock shows in pg_locks while the runner still
    # reads its try-lock's answer, and ending the session then is a lost connection (exit 5)
    wait_for(started.exists, what="the job to start")
    holder, _ = wait_for(lambda: holder_of(plain_session, cfg, job))
    plain_session.execute("SELECT pg_terminate_backend(%s)", (holder.pid,))
    assert proc.wait(timeout=30) == 4, proc.communicate()[1]
    [report] = report_now(config, job.name)
    assert (report.status, report.acquired, report.outcomes) == (
        "lock_lost",
        1,
        (("web-1", "lock_lost"),),
    )
    [alert] = alerts([report])
    assert alert.kind == "lock_lost"
    assert (
        alert.message
        == f"{job.name} {format_slot(report.slot)} lost its lock on web-1 while the job ran"
    )


def test_job_exiting_1_is_failed(setup, cli_env):
    config, _, job = setup("fails", command=["false"])
    assert run_job(config, job.name, "--instance", "web-2", env=cli_env) == 1
    [report] = report_now(config, job.name)
    assert (report.status, report.outcomes) == ("failed", (("web-2", "failed"),))
    [alert] = alerts([report])
    assert alert.kind == "failed" and alert.message.endswith("failed on web-2")


# -- stale holders ----------------------------------------------------------------------------


def test_idle_session_holding_the_key_is_stale(setup, cli_env, plain_session, pg_url):
    """(b) A psql-like session took the job's key and went idle; the job now skips."""
    config, cfg, job = setup("idle_holder", command=["true"])
    holding = psycopg.connect(pg_url, autocommit=True)
    try:
        holding.execute("SELECT pg_advisory_lock(%s)", (job.key.value,))
        assert run_job(config, job.name, "--instance", "web-1", env=cli_env) == 3
        time.sleep(1.2)
        found = holder_of(plain_session, cfg, job)
        assert found is not None, "no granted holder"
        holder, now = found
        assert holder.pid == holding.info.backend_pid and holder.state == "idle"
        [marked] = mark_stale(
            [holder], [job], runs_of(config, job.name), now=now, idle_threshold=timedelta(seconds=1)
        )
    finally:
        holding.close()
    assert marked.stale is not None and marked.stale.startswith("idle for ")
    assert marked.stale.endswith("with no running run in the ledger")
    assert marked.run_id is None and marked.instance is None
    [alert] = alerts([], [marked])
    assert alert.kind == "stale_holder" and alert.job == job.name and alert.database == "main"
    assert f"pid {holder.pid}" in alert.message and marked.stale in alert.message


def test_lock_kept_after_its_run_finished_is_stale(setup, plain_session, monkeypatch):
    """(d) The unlock did not free the key: the run is over, the lock is still held by its
    session. The job takes its key once more on the lock's own session while it runs (session
    advisory locks stack), so the finish's one unlock leaves a real hold behind; the session is
    kept open after the run."""
    from lockconsole import run_once

    config, cfg, job = setup("kept_lock")
    with run_once(job.name, config=cfg, instance="web-1") as attempt:
        assert attempt.acquired
        lock = attempt.lock
        suffix = "_pair" if "key1" in lock.key_params else ""
        query = sqlfiles.load("try_advisory_lock_plain" + suffix)
        assert lock.conn.execute(query, lock.key_params).fetchone()[0] is True
        monkeypatch.setattr(lock, "close", lambda: None)
    assert not lock.held  # the run let its own hold go: the one taken on top of it remains
    try:
        run = attempt.run
        assert run.outcome == "succeeded"
        time.sleep(2.2)
        found = holder_of(plain_session, cfg, job)
        assert found is not None, "no granted holder"
        holder, now = found
        assert holder.pid == run.session_id
        [marked] = mark_stale(
            [holder], [job], runs_of(config, job.name), now=now, idle_threshold=HOUR
        )
    finally:
        lock.conn.close()
    assert (marked.run_id, marked.instance, marked.held_since) == (run.id, "web-1", run.started_at)
    assert marked.stale is not None
    assert marked.stale == (
        f"run {run.id} on web-1 finished (succeeded) at {stamp(run.finished_at)} but its "
        "lock is still held"
    )
    [alert] = alerts([], [marked])
    assert alert.kind == "stale_holder" and "(web-1)" in alert.message


def test_lock_held_past_max_duration_is_stale(setup, cli_env, plain_session):
    """(a) A real run holds the lock past max_duration; a running ledger row keeps (b) away."""
    config, cfg, job = setup("overrun", max_duration="1s")
    proc = lockconsole(
        config, "run", job.name, "--instance", "web-3", "--", "sleep", "30", env=cli_env
    )
    try:
        wait_for(lambda: holder_of(plain_session, cfg, job))
        time.sleep(1.5)
        found = holder_of(plain_session, cfg, job)
        assert found is not None, "no granted holder"
        holder, now = found
        runs = runs_of(config, job.name)
        [marked] = mark_stale([holder], [job], runs, now=now, idle_threshold=HOUR)
        [tight] = mark_stale([holder], [job], runs, now=now, idle_threshold=timedelta(0))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        proc.communicate()
    [run] = runs
    assert (marked.run_id, marked.instance, marked.held_since) == (run.id, "web-3", run.started_at)
    assert re.fullmatch(r"held \d+(\.\d)?s, longer than max_duration 1s", marked.stale or "")
    assert tight.stale == marked.stale, "an idle lock session of a running run is not idle-stale"
    [alert] = alerts([], [marked])
    assert alert.kind == "stale_holder" and "longer than max_duration 1s" in alert.message


# -- duplicates -------------------------------------------------------------------------------


def test_two_runs_without_unique_key_leave_duplicates(setup, cli_env, pg_url, uid, plain_session):
    from lockconsole.backends.duplicates import summary

    table = f"invoices_{uid}"
    plain_session.execute(
        sql.SQL("CREATE TABLE {} (tenant_id int, period text, amount int)").format(
            sql.Identifier(table)
        )
    )
    try:
        spec = {"table": table, "key": ["tenant_id", "period"]}
        config, cfg, job = setup("billing", once_per_slot=False, idempotency=spec)
        slot = last_0200(job)
        for i in (1, 2):
            code = run_job(
                config,
                job.name,
                "--instance",
                f"web-{i}",
                "--slot",
                slot,
                "--",
                PYTHON,
                "-c",
                INSERT_INVOICES,
                pg_url,
                table,
                env=cli_env,
            )
            assert code == 0
        groups, surplus = plain_session.execute(
            sql.SQL(
                "SELECT count(*), coalesce(sum(n - 1), 0) FROM (SELECT count(*) AS n FROM {} "
                "GROUP BY tenant_id, period HAVING count(*) > 1) d"
            ).format(sql.Identifier(table))
        ).fetchone()
        found_dups = summary(cfg.database_for(job), job.idempotency)
    finally:
        plain_session.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    assert (groups, surplus) == (3, 3)
    assert (found_dups.groups, found_dups.surplus_rows) == (3, 3)
    reports = report_now(config, job.name)
    found = alerts(reports, duplicates={job.name: found_dups}, jobs=[job])
    assert alerts([], duplicates={job.name: (groups, surplus)}, jobs=[job])[0] == found[1]
    assert [a.kind for a in found] == ["double_run", "duplicates"]
    assert found[1].message == f"{table} has 3 duplicate (tenant_id, period) groups, 3 surplus rows"
    assert found[1].job == job.name and found[1].database == "main"


# -- crafted rows: slot reports ---------------------------------------------------------------

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
NIGHTLY = Job(
    "nightly",
    "main",
    "pg-session",
    LockKey("int64", 4242),
    schedule="0 2 * * *",
    max_duration=timedelta(hours=2),
)


def run(
    outcome: str, *, slot: datetime = T0, instance: str = "web-1", at: float = 0.5, **changes: Any
) -> Run:
    """A crafted ledger row of job "nightly", started `at` seconds after its slot."""
    values: dict[str, Any] = dict(
        job="nightly",
        slot=slot,
        instance=instance,
        host="h",
        pid=1,
        trigger="scheduled",
        outcome=outcome,
        started_at=slot + timedelta(seconds=at),
    )
    values.update(changes)
    return Run(**values)


def reports_at(now: datetime, runs: list[Run], **kwargs: Any) -> list[Any]:
    kwargs.setdefault("lookback", timedelta(days=3))
    kwargs.setdefault("grace", timedelta(minutes=10))
    return slot_reports([NIGHTLY], runs, now=now, **kwargs)


@pytest.mark.parametrize(
    ("outcome", "status"),
    [
        ("acquired", "running"),
        ("succeeded", "ok"),
        ("failed", "failed"),
        ("lock_lost", "lock_lost"),
    ],
)
def test_one_acquired_attempt_sets_the_status(outcome, status):
    [report] = reports_at(T0 + HOUR, [run("skipped", instance="web-2"), run(outcome, at=0.2)])
    assert report.status == status and report.acquired == 1 and report.skipped == 1
    assert report.outcomes == (("web-1", outcome), ("web-2", "skipped")), "start order"


def test_missed_nights_counted_from_first_appearance_only():
    night = timedelta(days=1)
    runs = [run("succeeded", slot=T0 + night)]
    reports = reports_at(T0 + 3 * night + HOUR, runs, lookback=timedelta(days=10))
    assert [(r.slot, r.status) for r in reports] == [
        (T0 + 3 * night, "missed"),
        (T0 + 2 * night, "missed"),
        (T0 + night, "ok"),
    ]
    # first_seen moves the start; the lookback window cuts it too
    seen = {"nightly": T0 - night}
    assert len(reports_at(T0 + 3 * night + HOUR, runs, first_seen=seen, lookback=night * 10)) == 5
    assert len(reports_at(T0 + 3 * night + HOUR, runs, first_seen=seen, lookback=night * 2)) == 2


def test_grace_delays_missed_and_all_skipped_slots():
    runs = [run("succeeded", slot=T0 - DAY), run("skipped", at=1), run("skipped", at=2)]
    assert [r.status for r in reports_at(T0 + MINUTE, runs)] == ["ok"]
    [missed, ok] = reports_at(T0 + HOUR, runs)
    assert (missed.status, missed.skipped, missed.acquired, ok.status) == ("missed", 2, 0, "ok")
    [alert] = alerts([missed])
    assert (
        alert.message
        == "nightly 2026-11-29 02:00:00 UTC did not run: every instance skipped it (web-1, web-1)"
    )


def test_manual_runs_never_make_a_slot_double_or_missed():
    manual = run("succeeded", slot=T0 + timedelta(seconds=30), trigger="manual", at=0)
    lone_skip = run("skipped", slot=T0 + HOUR, trigger="manual", at=0)
    reports = reports_at(T0 + 2 * HOUR, [run("succeeded"), manual, lone_skip])
    assert [(r.slot, r.status) for r in reports] == [(manual.slot, "ok"), (T0, "ok")]
    only_manual = reports_at(T0 + DAY + HOUR, [run("succeeded", slot=T0 - HOUR, trigger="manual")])
    assert [r.status for r in only_manual] == ["missed", "missed", "ok"]


def test_running_slots_stay_in_view_past_the_lookback():
    old = run("acquired", slot=T0 - 5 * DAY)
    reports = reports_at(T0 + HOUR, [old, run("succeeded")], lookback=HOUR * 2)
    assert [(r.slot, r.status) for r in reports] == [(T0, "ok"), (old.slot, "running")]


def test_double_run_message_names_repeats_and_outcomes():
    runs = [run("failed"), run("succeeded", at=5), run("acquired", instance="web-2", at=9)]
    [report] = reports_at(T0 + HOUR, runs)
    assert (report.status, report.acquired) == ("double_run", 3)
    [alert] = alerts([report])
    assert alert.message == (
        "nightly 2026-11-29 02:00:00 UTC ran 3 times on 2 instance(s): "
        "web-1 (failed), web-1, web-2 (acquired)"
    )


def test_firings_newest_first_in_the_jobs_timezone():
    job = Job(
        "j",
        "main",
        "pg-session",
        LockKey("int64", 1),
        schedule="0 2 * * *",
        timezone="Europe/Berlin",
    )
    got = list(firings(job, T0 - DAY, T0 + DAY, 10))
    assert got == [datetime(2026, 11, 30, 1, tzinfo=UTC), datetime(2026, 11, 29, 1, tzinfo=UTC)]
    assert list(firings(NIGHTLY, T0, T0, 5)) == [T0], "both ends are inclusive"
    assert list(firings(NIGHTLY, T0, T0 - MINUTE, 5)) == []
    every = Job("e", "main", "pg-session", LockKey("int64", 1), schedule="* * * * * */2")
    assert len(list(firings(every, T0, T0 + HOUR, 7))) == 7, "capped"


def test_format_slot_always_shows_seconds():
    assert format_slot(T0) == "2026-11-29 02:00:00 UTC"
    assert format_slot(T0 + timedelta(seconds=4)) == "2026-11-29 02:00:04 UTC"


def test_duplicates_without_job_details_or_surplus():
    found = alerts([], duplicates={"b": 0, "a": 7})
    assert [(a.kind, a.job, a.message) for a in found] == [
        ("duplicates", "a", "a's idempotency table has 7 duplicate key groups")
    ]
    job = Job(
        "a",
        "main",
        "pg-session",
        LockKey("int64", 1),
        idempotency=Idempotency("invoices", ("tenant_id", "period")),
    )
    [alert] = alerts([], duplicates={"a": (120, 240)}, jobs=[job])
    assert (
        alert.message == "invoices has 120 duplicate (tenant_id, period) groups, 240 surplus rows"
    )


# -- crafted rows: stale holders --------------------------------------------------------------


def holder(**changes: Any) -> Holder:
    values: dict[str, Any] = dict(
        database="main",
        kind="advisory",
        key="4242",
        key_kind="int64",
        granted=True,
        source="pg_locks",
        job="nightly",
        pid=812,
        state="active",
        state_since=T0,
        backend_start=T0 - HOUR,
    )
    values.update(changes)
    return Holder(**values)


def stale(h: Holder, runs: Sequence[Run] = (), *, now: datetime = T0 + HOUR, **kw: Any) -> Holder:
    kw.setdefault("idle_threshold", timedelta(minutes=10))
    [out] = mark_stale([h], [NIGHTLY], runs, now=now, **kw)
    return out


def test_held_past_max_duration_uses_the_ledger_start():
    ours = run("acquired", id=9, session_id=812, at=0)
    out = stale(holder(), [ours], now=T0 + timedelta(hours=2, minutes=13))
    assert out.stale == "held 2h13m, longer than max_duration 2h00m"
    assert (out.held_since, out.instance, out.run_id) == (T0, "web-1", 9)
    # a run from before this backend started is not ours: what the console's sightings tell
    # stands in (a lower bound), never xact_start (a session lock outlives its transactions)
    seen = {"held_since": T0 + HOUR, "held_from": "at_least"}
    not_ours = stale(
        holder(backend_start=T0 + MINUTE, xact_start=T0 + 3 * HOUR, **seen),
        [ours],
        now=T0 + 3 * HOUR + MINUTE,
    )
    assert not_ours.run_id is None
    assert not_ours.stale == "held at least 2h01m, longer than max_duration 2h00m"
    only_xact = holder(backend_start=T0 + MINUTE, xact_start=T0)
    assert stale(only_xact, [ours], now=T0 + 3 * HOUR).stale is None
    assert stale(holder(), [ours], now=T0 + HOUR).stale is None


def test_idle_holder_with_and_without_a_running_run():
    idle = holder(state="idle", state_since=T0 + 30 * MINUTE)
    assert stale(idle).stale == "idle for 30m00s with no running run in the ledger"
    assert stale(idle, [run("acquired", id=1, session_id=812, at=3600)]).stale is None
    assert stale(idle, [run("acquired", id=1, session_id=None, at=3600)]).stale is None
    assert stale(idle, idle_threshold=HOUR).stale is None
    in_xact = holder(state="idle in transaction", state_since=T0 + 45 * MINUTE)
    assert stale(in_xact).stale.startswith("idle in transaction for 15m00s")


def test_orphaned_and_unmapped_holders():
    assert stale(holder(), orphaned_pids={812}).stale == ORPHANED
    unmapped = holder(job=None, state="idle", state_since=T0, xact_start=T0 - DAY)
    assert stale(unmapped, [run("acquired", session_id=812)]).stale == "idle for 1h00m"
    assert stale(unmapped, orphaned_pids={812}, idle_threshold=DAY).stale == ORPHANED
    assert stale(holder(job=None, state="active")).stale is None


def test_finished_run_with_lock_still_held_and_combined_reasons():
    done = run("lock_lost", id=812, session_id=812, at=0, finished_at=T0 + 55 * MINUTE)
    out = stale(holder(state="idle", state_since=T0 + 55 * MINUTE), [done])
    assert out.stale == (
        "run 812 on web-1 finished (lock_lost) at 2026-11-29 02:55:00 UTC "
        "but its lock is still held"
    )
    late = stale(holder(state="idle", state_since=T0), [done], now=T0 + 3 * HOUR)
    assert late.stale is not None and late.stale.split("; ") == [
        "held 3h00m, longer than max_duration 2h00m",
        "idle for 3h00m with no running run in the ledger",
        "run 812 on web-1 finished (lock_lost) at 2026-11-29 02:55:00 UTC but its lock is "
        "still held",
    ]
    just_now = run("succeeded", session_id=812, finished_at=T0 + HOUR - timedelta(seconds=1))
    assert stale(holder(), [just_now]).stale is None, "a run finishing now may be releasing"


def test_waiters_are_never_stale():
    waiter = holder(granted=False, state="idle", state_since=T0 - DAY)
    assert stale(waiter, orphaned_pids={812}) is waiter


def test_leases_by_fencing_token_owner_and_min_hold():
    job = Job(
        "nightly",
        "main",
        "lease",
        LockKey("name", "nightly"),
        max_duration=timedelta(hours=1),
        min_hold=timedelta(minutes=5),
    )
    lease = holder(
        kind="lease",
        key="nightly",
        key_kind="name",
        pid=None,
        state=None,
        source="shedlock",
        locked_by="web-2",
        held_since=T0,
        fencing_token=7,
        lock_until=T0 + HOUR,
    )
    ours = run("acquired", id=3, instance="web-2", fencing_token=7, at=0.1)
    [out] = mark_stale([lease], [job], [ours], now=T0 + 30 * MINUTE, idle_threshold=MINUTE)
    assert (out.stale, out.run_id, out.instance, out.held_since) == (None, 3, "web-2", T0)
    [late] = mark_stale([lease], [job], [ours], now=T0 + 2 * HOUR, idle_threshold=MINUTE)
    assert late.stale == "held 2h00m, longer than max_duration 1h00m"
    # released, keeping min_hold: not stale; still held long after the run: stale
    done = run(
        "succeeded", id=3, instance="web-2", at=0.1, finished_at=T0 + MINUTE, fencing_token=7
    )
    in_min_hold = replace(lease, fencing_token=None, lock_until=T0 + 5 * MINUTE)
    [held] = mark_stale([in_min_hold], [job], [done], now=T0 + 4 * MINUTE, idle_threshold=MINUTE)
    assert held.stale is None and held.run_id == 3
    [kept] = mark_stale([lease], [job], [done], now=T0 + 10 * MINUTE, idle_threshold=MINUTE)
    assert kept.stale == (
        "run 3 on web-2 finished (succeeded) at 2026-11-29 02:01:00 UTC but its lock is still held"
    )


def test_two_executions_at_the_same_time_raise_an_overlap_alert_with_its_length() -> None:
    """A holder that lost its lock ran on 0.25 s after the takeover began: overlap, even though
    one of them is lock_lost; back-to-back executions are no overlap."""
    second = timedelta(seconds=1)
    lost = run("lock_lost", at=0.5, finished_at=T0 + 2 * second, id=1)
    takeover = run("succeeded", instance="web-2", at=1.75, finished_at=T0 + 3 * second, id=2)
    [report] = reports_at(T0 + HOUR, [lost, takeover])
    assert report.overlap == pytest.approx(0.25)
    found = [a for a in alerts([report]) if a.kind == "overlap"]
    assert len(found) == 1 and "250ms" in found[0].message
    after = replace(takeover, started_at=T0 + 2 * second)
    [report] = reports_at(T0 + HOUR, [lost, after])
    assert report.overlap == 0 and not [a for a in alerts([report]) if a.kind == "overlap"]
