"""Leases under clock skew and overrun: the database clock decides, min_hold guards a short job
from a late scheduler, and a job past max_duration is taken over with a higher fencing token
while the idempotency key keeps every invoice single."""

from __future__ import annotations

import pytest

from tests.faults.fault_helpers import (
    acquired_run,
    create_invoices,
    duplicate_invoices,
    finish,
    invoices,
    job_config,
    runs_of,
    start_worker,
    wait_for,
)
from tests.support.barrier import Barrier

SLOT = "2030-01-01T02:00:00+00:00"


@pytest.fixture
def lease(pg_url, pg_conn, uid, tmp_path):
    table = f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)

    def make(**extra: object):
        extra.setdefault("lease_table", f"shedlock_{uid}")
        config = job_config(
            tmp_path / "lockconsole.toml", pg_url, f"billing_{uid}", "lease", **extra
        )
        return config, f"billing_{uid}", table

    yield make
    pg_conn.execute(f"drop table if exists {table}")
    pg_conn.execute(f"drop table if exists shedlock_{uid}")


def test_skewed_app_clock_does_not_matter(lease, tmp_path) -> None:
    """An instance whose clock runs an hour ahead still sees the lease held (DB clock)."""
    config, job, table = lease(max_duration="10m", watchdog_interval=0.1)
    # web-1 holds the lease, paused after its first charge, until the skewed workers are done
    barrier = Barrier(tmp_path / "barrier", "charged_1")
    holding = ("--slot", SLOT, "--tenants", "2", "--delay", "0")
    a = start_worker(config, job, "web-1", table, *holding, barrier=barrier)
    barrier.wait("charged_1")
    skewed = {
        s: start_worker(config, job, f"skew{s}", table, "--slot", SLOT, "--skew", s)
        for s in ("3600", "-3600", "86400")
    }
    for skew, proc in skewed.items():
        code, out, err = finish(proc)
        assert (code, out.get("outcome")) == (3, "skipped"), (skew, out, err)
        assert out["message"] == "lock held by another session"
    barrier.release("charged_1")
    code, out, err = finish(a)
    assert (code, out["outcome"], out["charged"]) == (0, "succeeded", 2), (out, err)


@pytest.mark.parametrize("once_per_slot", [False, True])
def test_min_hold_guards_a_short_job_from_a_late_scheduler(lease, pg_conn, once_per_slot) -> None:
    """A 0.1 s job with min_hold = 10m: an instance firing late (clock 1 s behind) skips, even
    without the ledger's once_per_slot check (ShedLock's lockAtLeastFor alone). The hold is far
    longer than a loaded machine takes to start the late instance."""
    config, job, table = lease(max_duration="1h", min_hold="10m", once_per_slot=once_per_slot)
    code, out, _ = finish(
        start_worker(
            config, job, "web-1", table, "--slot", SLOT, "--tenants", "2", "--delay", "0.05"
        )
    )
    assert (code, out["outcome"]) == (0, "succeeded")
    lease_left = pg_conn.execute(f"select lock_until > now() from shedlock_{job.split('_')[1]}")
    assert lease_left.fetchone() == (True,), "the job returned; the lease stays (database clock)"
    code, late, _ = finish(
        start_worker(config, job, "web-2", table, "--slot", SLOT, "--skew", "-1")
    )
    assert (code, late["outcome"], late["message"]) == (
        3,
        "skipped",
        "lock held by another session",
    )
    rows = invoices(pg_conn, "postgresql", table)
    assert len(rows) == 2 and duplicate_invoices(rows) == 0
    until = pg_conn.execute(f"select lock_until - locked_at from shedlock_{job.split('_')[1]}")
    assert until.fetchone()[0].total_seconds() == pytest.approx(600, abs=0.05)


def test_overrun_past_max_duration_is_taken_over(lease, pg_url, pg_conn) -> None:
    """A job outlives its 2 s lease; a second instance takes over with a higher token; the late
    writer (the first) keeps writing a while with its lower token until its watchdog sees it;
    the unique key lets every tenant be charged once."""
    config, job, table = lease(max_duration="2s", watchdog_interval=3)
    tenants = 30
    a = start_worker(
        config, job, "web-1", table, "--slot", SLOT, "--tenants", str(tenants), "--delay", "0.15"
    )
    holder = wait_for(lambda: acquired_run(config, job), what="the holder")
    lease_table = f"shedlock_{job.split('_')[1]}"
    wait_for(
        lambda: (
            pg_conn.execute(f"select lock_until <= now() from {lease_table}").fetchone() == (True,)
        ),
        what="the 2 s lease to expire (database clock)",
    )
    # web-2's own config gives it a long lease: however slow the machine, it never overruns
    long_lease = job_config(
        config.with_name("web-2.toml"),
        pg_url,
        job,
        "lease",
        lease_table=lease_table,
        max_duration="1h",
        watchdog_interval=3,
    )
    fast = ("--slot", SLOT, "--tenants", str(tenants), "--delay", "0.02")
    b = start_worker(long_lease, job, "web-2", table, *fast)
    code_b, out_b, err_b = finish(b)
    code_a, out_a, err_a = finish(a)
    assert (code_a, out_a["outcome"]) == (4, "lock_lost"), (out_a, err_a)
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
    assert out_b["token"] > holder.fencing_token, "the late writer's token is lower"
    rows = invoices(pg_conn, "postgresql", table)
    assert duplicate_invoices(rows) == 0
    assert sorted(r[0] for r in rows) == list(range(tenants))
    tokens = {r[3] for r in rows}
    assert tokens <= {holder.fencing_token, out_b["token"]}
    late = [r for r in rows if r[3] == holder.fencing_token]
    assert out_a["charged"] == len(late) and out_b["blocked"] >= 1, (out_a, out_b)
    runs = {r.instance: r for r in runs_of(config, job)}
    assert runs["web-1"].outcome == "lock_lost" and runs["web-2"].fencing_token == out_b["token"]
