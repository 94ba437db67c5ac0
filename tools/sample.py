"""A fixed, deterministic data set and a Console stand-in over it, for snapshot tests,
screenshots and console benchmarks. Behaviour tests use real databases instead.

The data tells the billing story at a frozen moment (2026-11-29 02:15 UTC): the triple-charge
night of 2026-11-27, the nights after with one instance running and two skipping, a web-1 run
in progress with web-2 waiting, a stale psql session holding an unmapped key, a MySQL and a
lease holder, and 120 duplicated invoices.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.config.loader import Config, parse_config
from lockconsole.model.jobs import Outcome, Run
from lockconsole.model.slots import next_fire
from lockconsole.model.views import DuplicateGroup, Holder, JobStatus, JournalEntry, Snapshot

FROZEN_NOW = datetime(2026, 11, 29, 2, 15, 0, tzinfo=UTC)
INSTANCES = ("web-1", "web-2", "web-3")

SAMPLE_CONFIG = """
[databases.billing]
url = "postgresql://billing:${BILLING_PASSWORD}@db.internal:5432/billing"
[databases.reports]
url = "mysql://reports@mysql.internal:3306/reports"

[jobs.nightly_billing]
database = "billing"
schedule = "0 2 * * *"
strategy = "pg-session"
key = 4242
command = ["python", "-m", "billing.nightly"]
max_duration = "2h"
[jobs.nightly_billing.idempotency]
table = "invoices"
key = ["tenant_id", "period"]
run_column = "run_id"

[jobs.invoice_reminders]
database = "billing"
schedule = "30 * * * *"
strategy = "pg-xact"
command = ["python", "-m", "billing.reminders"]

[jobs.report_export]
database = "reports"
schedule = "0 3 * * *"
strategy = "mysql"
command = ["python", "-m", "reports.export"]

[jobs.lease_cleanup]
database = "billing"
schedule = "*/10 * * * *"
strategy = "lease"
max_duration = "10m"
command = ["python", "-m", "billing.cleanup"]
"""


def sample_config() -> Config:
    return parse_config(SAMPLE_CONFIG, "sample.toml", {"BILLING_PASSWORD": "not-shown"})


def make_run(
    rid: int,
    job: str,
    slot: datetime,
    instance: str,
    outcome: Outcome,
    start_s: float,
    took_s: float | None,
    **extra: Any,
) -> Run:
    started = slot + timedelta(seconds=start_s)
    finished = None if took_s is None else started + timedelta(seconds=took_s)
    code = {"succeeded": 0, "failed": 1}.get(outcome)
    return Run(
        job=job,
        slot=slot,
        instance=instance,
        host=instance,
        pid=4000 + rid,
        trigger=extra.pop("trigger", "scheduled"),
        outcome=outcome,
        started_at=started,
        finished_at=finished,
        exit_code=extra.pop("exit_code", code),
        message=extra.pop("message", None),
        session_id=extra.pop("session_id", 9000 + rid),
        strategy=extra.pop("strategy", "pg-session"),
        lock_key=extra.pop("lock_key", "4242"),
        id=rid,
        **extra,
    )


def sample_runs() -> list[Run]:
    runs: list[Run] = []
    rid = 800
    for day in (27, 28, 29):
        slot = datetime(2026, 11, day, 2, 0, tzinfo=UTC)
        for i, instance in enumerate(INSTANCES):
            rid += 1
            if day == 27:  # before the lock: every instance billed every tenant
                runs.append(
                    make_run(
                        rid, "nightly_billing", slot, instance, "succeeded", 0.3 * i, 612 + 9 * i
                    )
                )
            elif day == 29 and i == 0:  # tonight: web-1 is still billing
                runs.append(
                    make_run(
                        rid,
                        "nightly_billing",
                        slot,
                        instance,
                        "acquired",
                        0.3,
                        None,
                        session_id=31001,
                    )
                )
            elif i == 0:
                runs.append(make_run(rid, "nightly_billing", slot, instance, "succeeded", 0.3, 598))
            else:
                runs.append(
                    make_run(
                        rid,
                        "nightly_billing",
                        slot,
                        instance,
                        "skipped",
                        0.3 + 0.4 * i,
                        0.01,
                        message="lock held by another session",
                    )
                )
    nights: tuple[tuple[int, Outcome], ...] = (
        (22, "succeeded"),
        (23, "lock_lost"),
        (0, "failed"),
        (1, "succeeded"),
    )
    for hour, outcome in nights:
        day = 28 if hour >= 22 else 29
        slot = datetime(2026, 11, day, hour, 30, tzinfo=UTC)
        rid += 1
        message = {
            "lock_lost": "lock or its connection went away",
            "failed": "exited with code 1",
        }.get(outcome)
        runs.append(
            make_run(
                rid,
                "invoice_reminders",
                slot,
                INSTANCES[hour % 3],
                outcome,
                0.2,
                41,
                strategy="pg-xact",
                lock_key="-6532131512351921",
                message=message,
            )
        )
    rid += 1
    runs.append(
        make_run(
            rid,
            "report_export",
            datetime(2026, 11, 28, 3, 0, tzinfo=UTC),
            "web-2",
            "succeeded",
            0.5,
            95,
            strategy="mysql",
            lock_key="report_export",
        )
    )
    runs.sort(key=lambda r: (r.started_at, r.id or 0), reverse=True)
    return runs


def sample_holders(now: datetime = FROZEN_NOW) -> list[Holder]:
    since = datetime(2026, 11, 29, 2, 0, 0, 300000, tzinfo=UTC)

    def advisory(**fields: Any) -> Holder:  # a billing pg_locks advisory holder or waiter
        return Holder(
            database="billing",
            datname="billing",
            user="billing",
            source="pg_locks",
            kind="advisory",
            key_kind="int64",
            **fields,
        )

    return [
        advisory(
            key="4242",
            job="nightly_billing",
            granted=True,
            mode="ExclusiveLock",
            pid=31001,
            application_name="lockconsole:nightly_billing@web-1",
            client_addr="10.0.1.11",
            backend_start=since,
            state="idle",
            state_since=since,
            query="select pg_try_advisory_lock(4242), pg_backend_pid()",
            held_since=since,
            instance="web-1",
            run_id=810,
        ),
        advisory(
            key="4242",
            job="nightly_billing",
            granted=False,
            mode="ExclusiveLock",
            pid=31077,
            application_name="psql",
            client_addr="10.0.9.4",
            waiting_since=now - timedelta(minutes=2),
            blocked_by=(31001,),
            state="active",
            state_since=now - timedelta(minutes=2),
            query="select pg_advisory_lock(4242)",
        ),
        advisory(
            key="31337",
            job=None,
            granted=True,
            mode="ExclusiveLock",
            pid=29950,
            application_name="psql",
            client_addr="10.0.9.4",
            backend_start=now - timedelta(hours=3),
            state="idle",
            state_since=now - timedelta(minutes=14),
            query="select pg_advisory_lock(31337)",
            stale="idle for 14m with no running run in the ledger",
        ),
        Holder(
            database="reports",
            kind="user_lock",
            key="report_export",
            key_kind="name",
            job="report_export",
            granted=True,
            source="METADATA_LOCK_INFO",
            pid=88,
            user="reports",
            client_addr="10.0.1.12",
            state="Sleep",
            state_since=now - timedelta(seconds=40),
            held_since=now - timedelta(seconds=40),
            query=None,
        ),
        Holder(
            database="billing",
            kind="lease",
            key="lease_cleanup",
            key_kind="name",
            job="lease_cleanup",
            granted=True,
            source="shedlock",
            held_since=now - timedelta(minutes=5),
            lock_until=now + timedelta(minutes=5),
            locked_by="web-3",
            fencing_token=57,
            instance="web-3",
        ),
    ]


def many_holders(count: int, sessions: int = 50) -> list[Holder]:
    """`count` granted advisory holders over `sessions` sessions (for console benchmarks)."""
    base = datetime(2026, 11, 29, 1, 0, tzinfo=UTC)
    return [
        Holder(
            database="billing",
            kind="advisory",
            key=str(100_000 + i),
            key_kind="int64",
            granted=True,
            source="pg_locks",
            mode="ExclusiveLock",
            pid=20_000 + i % sessions,
            user="app",
            application_name=f"worker-{i % sessions}",
            state="idle",
            state_since=base,
            backend_start=base,
        )
        for i in range(count)
    ]


def sample_journal() -> list[JournalEntry]:
    """What the holder journal saw around the unguarded night (27th) and tonight (29th): a psql
    session that held 4242 over the slot and left, and tonight's web-1 still holding it."""
    night = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
    tonight = datetime(2026, 11, 29, 2, 0, 0, 300000, tzinfo=UTC)

    def entry(i: int, **fields: Any) -> JournalEntry:
        base: dict[str, Any] = dict(
            database="billing", kind="advisory", source="pg_locks", key="4242",
            job="nightly_billing", mode="ExclusiveLock", user="billing", locked_by=None,
        )  # fmt: skip
        base.update(fields)
        return JournalEntry(id=i, **base)

    return [
        entry(
            1,
            pid=30412,
            application="psql",
            client="10.0.9.4",
            session_start=night - timedelta(minutes=4),
            seen_after=night - timedelta(seconds=4),
            first_seen=night - timedelta(seconds=2),
            last_seen=night + timedelta(seconds=5),
            gone_by=night + timedelta(seconds=7),
            earliest=night - timedelta(seconds=4),
        ),
        entry(
            2,
            pid=31001,
            application="lockconsole:nightly_billing@web-1",
            client="10.0.1.11",
            session_start=tonight,
            seen_after=tonight - timedelta(seconds=1, microseconds=300000),
            first_seen=tonight + timedelta(seconds=0.7),
            last_seen=None,
            gone_by=None,
            earliest=tonight - timedelta(seconds=1, microseconds=300000),
        ),
    ]


def sample_duplicates() -> list[DuplicateGroup]:
    return [
        DuplicateGroup(key=(tenant, "2026-11"), count=3, run_ids=(801, 802, 803))
        for tenant in range(1001, 1121)
    ]


def sample_snapshot(now: datetime = FROZEN_NOW) -> Snapshot:
    from lockconsole.console.snapshot.reports import alerts, slot_reports

    config = sample_config()
    jobs = list(config.jobs.values())
    runs = sample_runs()
    holders = sample_holders(now)
    reports = slot_reports(
        jobs, runs, now=now, lookback=timedelta(days=3), grace=timedelta(minutes=5)
    )
    found = alerts(reports, holders, {"nightly_billing": (120, 240)}, jobs=jobs)
    status = tuple(
        JobStatus(
            j,
            next_fire(j, now),
            next((h for h in holders if h.job == j.name and h.granted), None),
            next((r for r in runs if r.job == j.name), None),
        )
        for j in jobs
    )
    return Snapshot(
        taken_at=now,
        jobs=status,
        holders=tuple(holders),
        runs=tuple(runs),
        slots=tuple(reports),
        alerts=tuple(found),
        sources=(
            ("billing", "pg_locks"),
            ("billing:shedlock", "shedlock"),
            ("reports", "METADATA_LOCK_INFO"),
        ),
    )
