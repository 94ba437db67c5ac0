"""Frozen values shared by every layer: jobs, keys, runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal

Strategy = Literal["pg-session", "pg-xact", "mysql", "lease"]
STRATEGIES: tuple[str, ...] = ("pg-session", "pg-xact", "mysql", "lease")
Dialect = Literal["postgresql", "mysql", "sqlite"]
Outcome = Literal["skipped", "acquired", "succeeded", "failed", "lock_lost"]
Trigger = Literal["scheduled", "manual"]


@dataclass(frozen=True)
class LockKey:
    """A lock's identity as the database sees it: an int64, an int4 pair, or a name."""

    kind: Literal["int64", "int4pair", "name"]
    value: int | tuple[int, int] | str
    derived_from: str | None = None  # e.g. "sha256('nightly_billing')"

    def __str__(self) -> str:
        if self.kind == "int4pair":
            a, b = self.value  # type: ignore[misc]
            return f"{a},{b}"
        return str(self.value)


@dataclass(frozen=True)
class DatabaseURL:
    """A parsed database URL; `masked` is the only form that may be shown."""

    dialect: Dialect
    raw: str
    masked: str
    host: str | None = None
    port: int | None = None
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    database: str | None = None
    query: tuple[tuple[str, str], ...] = ()

    def __repr__(self) -> str:
        return f"DatabaseURL({self.masked!r})"


@dataclass(frozen=True)
class Database:
    name: str
    url: DatabaseURL


@dataclass(frozen=True)
class Idempotency:
    """Table and key columns that make a job's effect unique: invoices(tenant_id, period)."""

    table: str
    key: tuple[str, ...]
    run_column: str | None = None


@dataclass(frozen=True)
class Job:
    name: str
    database: str
    strategy: Strategy
    key: LockKey
    schedule: str | None = None
    timezone: str = "UTC"
    command: tuple[str, ...] | None = None
    callable: str | None = None
    max_duration: timedelta | None = None
    min_hold: timedelta = timedelta(0)
    idempotency: Idempotency | None = None
    lease_table: str = "shedlock"
    once_per_slot: bool = True
    watchdog_interval: float = 5.0
    stop_grace: float = 10.0
    allow_pooler: bool = False  # pg-session: run even behind a transaction-mode pooler


@dataclass(frozen=True)
class Run:
    """One attempt of one job on one instance: a row of the run ledger."""

    job: str
    slot: datetime
    instance: str
    host: str
    pid: int
    trigger: Trigger
    outcome: Outcome
    started_at: datetime
    finished_at: datetime | None = None
    exit_code: int | None = None
    message: str | None = None
    fencing_token: int | None = None
    session_id: int | None = None
    strategy: str | None = None
    lock_key: str | None = None
    id: int | None = None


HolderKind = Literal["advisory", "user_lock", "lease"]
AlertKind = Literal[
    "double_run", "missed", "lock_lost", "failed", "stale_holder", "duplicates", "pooler"
]


@dataclass(frozen=True)
class Holder:
    """A session holding or waiting for a lock (or a held lease row), as one database shows it."""

    database: str  # the configured database's name
    kind: HolderKind
    key: str  # as the app wrote it: "4242", "7,-2", "nightly_billing"
    key_kind: Literal["int64", "int4pair", "name"]
    granted: bool
    source: str  # where it was read: pg_locks, performance_schema.metadata_locks, shedlock, ...
    job: str | None = None  # the configured job this key maps to; None = unmapped
    datname: str | None = None
    mode: str | None = None
    waiting_since: datetime | None = None
    blocked_by: tuple[int, ...] = ()
    pid: int | None = None  # PostgreSQL backend pid / MySQL connection id
    user: str | None = None
    application_name: str | None = None
    client_addr: str | None = None
    backend_start: datetime | None = None
    xact_start: datetime | None = None
    state: str | None = None
    state_since: datetime | None = None
    query: str | None = None
    held_since: datetime | None = None
    lock_until: datetime | None = None  # leases
    locked_by: str | None = None  # leases
    fencing_token: int | None = None  # leases
    instance: str | None = None  # from the ledger, for our own runs
    run_id: int | None = None
    hidden: str | None = None  # what privileges hide, and which privilege would reveal it
    stale: str | None = None  # why this holder looks stale, for an operator


@dataclass(frozen=True)
class SlotReport:
    """What happened to one job in one slot, across every instance."""

    job: str
    slot: datetime
    acquired: int  # attempts that got the lock (running, succeeded, failed or lock_lost)
    skipped: int
    outcomes: tuple[tuple[str, str], ...]  # (instance, outcome), in start order
    status: Literal["ok", "running", "double_run", "missed", "lock_lost", "failed"]


@dataclass(frozen=True)
class Alert:
    kind: AlertKind
    job: str | None
    message: str
    slot: datetime | None = None
    database: str | None = None


@dataclass(frozen=True)
class DuplicateGroup:
    """Rows of an idempotency table that share one key."""

    key: tuple[object, ...]
    count: int
    run_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class JobStatus:
    job: Job
    next_fire: datetime | None
    holder: Holder | None
    last_run: Run | None


@dataclass(frozen=True)
class Snapshot:
    """Everything the console shows, taken at one moment; one database down hides no other."""

    taken_at: datetime
    jobs: tuple[JobStatus, ...] = ()
    holders: tuple[Holder, ...] = ()
    runs: tuple[Run, ...] = ()
    slots: tuple[SlotReport, ...] = ()
    alerts: tuple[Alert, ...] = ()
    errors: tuple[tuple[str, str], ...] = ()  # (database, error) for each database that failed
    sources: tuple[tuple[str, str], ...] = ()  # (database, where its holders were read)
    notes: tuple[tuple[str, str], ...] = ()  # (database, what privileges or setup hide)
