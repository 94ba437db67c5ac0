"""Frozen values shared by every layer: jobs, keys, runs."""

from __future__ import annotations

from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any, Literal

from lockconsole.model.construct import evolve as evolve

Strategy = Literal["pg-session", "pg-xact", "mysql", "lease", "redis"]
STRATEGIES: tuple[str, ...] = ("pg-session", "pg-xact", "mysql", "lease", "redis")
Dialect = Literal["postgresql", "mysql", "sqlite", "redis"]
Outcome = Literal["skipped", "paused", "acquired", "succeeded", "failed", "lock_lost"]
Trigger = Literal["scheduled", "manual", "rerun"]
# the outcomes of an attempt that held the slot's lock: it executed (or began to)
GOT_LOCK: frozenset[Outcome] = frozenset({"acquired", "succeeded", "failed", "lock_lost"})


@dataclass(frozen=True)
class LockKey:
    """A lock's identity as the database sees it: an int64, an int4 pair, or a name."""

    kind: Literal["int64", "int4pair", "name"]
    value: int | tuple[int, int] | str
    derived_from: str | None = None  # e.g. "sha256('nightly_billing')"

    def __str__(self) -> str:
        if self.kind == "int4pair":
            a, b = self.int4pair()
            return f"{a},{b}"
        return str(self.value)

    def int64(self) -> int:
        """The value of an int64 key."""
        if self.kind != "int64" or not isinstance(self.value, int):
            raise ValueError(f"a {self.kind} key is not an int64 key")
        return self.value

    def int4pair(self) -> tuple[int, int]:
        """The (a, b) of an int4 pair key."""
        if self.kind != "int4pair" or not isinstance(self.value, tuple):
            raise ValueError(f"a {self.kind} key is not an int4 pair")
        return self.value


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
    scan_prefixes: tuple[str, ...] = ()  # Redis: key prefixes whose keys are listed as holders

    def shares_connection(self, other: Database) -> bool:
        """One connection serves both: the same URL to the letter (so a lock's session can also
        write the ledger, in the same round trips and transactions)."""
        return self.url.raw == other.url.raw


@dataclass(frozen=True)
class Idempotency:
    """Table and key columns that make a job's effect unique: invoices(tenant_id, period)."""

    table: str
    key: tuple[str, ...]
    run_column: str | None = None


LedgerCommit = Literal["durable", "async"]
LEDGER_COMMITS: tuple[LedgerCommit, ...] = ("durable", "async")


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
    # the next attempt that finds an earlier slot abandoned (left "acquired", its runner gone)
    # closes it and runs that slot again under the lock, with trigger "rerun"
    rerun_abandoned: bool = False
    watchdog_interval: float = 5.0
    stop_grace: float = 10.0
    # seconds a check of the lock may take before it counts as a lost lock; None: check_timeout
    lock_check_timeout: float | None = None
    allow_pooler: bool = False  # pg-session: run even behind a transaction-mode pooler
    redis_prefix: str = "job-lock:default:"  # redis: ShedLock's job-lock:<environment>:
    # "durable": every ledger row waits for the server's WAL flush; "async": the "acquired" row
    # still does, a skipped row and an outcome do not (PostgreSQL, merged statements only)
    ledger_commit: LedgerCommit = "durable"
    # jobs naming one group share one lock on purpose (config/sharing.py); None: a lock of its own
    lock_group: str | None = None

    @property
    def check_timeout(self) -> float:
        """How long a lock check may wait for its answer: twice the watchdog's interval, 2 s
        at least (a check that is merely slow on a loaded machine is not a loss)."""
        if self.lock_check_timeout is not None:
            return self.lock_check_timeout
        return max(2.0, 2 * self.watchdog_interval)


DEFAULT_STRATEGY: Strategy = "pg-session"
# what a job's config leaves unsaid: the dataclass's own defaults, the one place they are written
JOB_DEFAULTS: dict[str, Any] = {f.name: f.default for f in fields(Job) if f.default is not MISSING}


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
    actor: str | None = None  # who asked for a manual run: "os_user@host"; None when scheduled
    clock_offset_ms: int | None = None  # the instance's wall clock minus the ledger server's


@dataclass(frozen=True)
class Pause:
    """A job paused by an operator: every attempt records "paused" and runs nothing."""

    job: str
    note: str
    paused_by: str  # os_user@host of the operator
    paused_at: datetime
    until: datetime | None = None  # None: until resumed

    def reason(self) -> str:
        """The message a paused attempt records: who, since when, until when, and why."""
        until = "" if self.until is None else f" until {self.until.isoformat()}"
        return f"paused by {self.paused_by} since {self.paused_at.isoformat()}{until}: {self.note}"

    def covers(self, moment: datetime) -> bool:
        """True when `moment` falls within this pause."""
        return self.paused_at <= moment and (self.until is None or moment < self.until)


ColumnType = Literal["id", "text", "int", "bigint", "time"]


@dataclass(frozen=True)
class LedgerColumn:
    """One column of the run ledger's table, named after the field of Run it stores."""

    name: str
    type: ColumnType
    size: int | None = None  # characters of a bounded text column; None: unbounded text
    nullable: bool = True


# The run ledger's columns, in table order: the one list the table, its SQL and Run agree on.
RUN_COLUMNS: tuple[LedgerColumn, ...] = (
    LedgerColumn("id", "id", nullable=False),
    LedgerColumn("job", "text", 128, nullable=False),
    LedgerColumn("slot", "time", nullable=False),
    LedgerColumn("instance", "text", 255, nullable=False),
    LedgerColumn("host", "text", 255, nullable=False),
    LedgerColumn("pid", "int", nullable=False),
    LedgerColumn("trigger", "text", 16, nullable=False),
    LedgerColumn("outcome", "text", 16, nullable=False),
    LedgerColumn("started_at", "time", nullable=False),
    LedgerColumn("finished_at", "time"),
    LedgerColumn("exit_code", "int"),
    LedgerColumn("message", "text"),
    LedgerColumn("fencing_token", "bigint"),
    LedgerColumn("session_id", "bigint"),
    LedgerColumn("strategy", "text", 16),
    LedgerColumn("lock_key", "text", 255),
    # added after the first release: a ledger without it gains it on first use (schema.migrate)
    LedgerColumn("actor", "text", 255),
    LedgerColumn("clock_offset_ms", "bigint"),  # ms: an instance a month off still fits
)
