"""Frozen values shared by every layer: jobs, keys, runs."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal, TypeVar

Strategy = Literal["pg-session", "pg-xact", "mysql", "lease", "redis"]
STRATEGIES: tuple[str, ...] = ("pg-session", "pg-xact", "mysql", "lease", "redis")
Dialect = Literal["postgresql", "mysql", "sqlite", "redis"]
Outcome = Literal["skipped", "acquired", "succeeded", "failed", "lock_lost"]
Trigger = Literal["scheduled", "manual"]
_V = TypeVar("_V")


def evolve(value: _V, **changes: Any) -> _V:
    """dataclasses.replace for these frozen values, without running __init__ again (5x faster
    on the run path; they have no __post_init__ and no __slots__). Unknown names are refused."""
    fields = value.__dict__
    unknown = changes.keys() - fields.keys()
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {', '.join(sorted(unknown))}")
    new = object.__new__(type(value))
    new.__dict__.update(fields, **changes)
    return new


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
    redis_prefix: str = "job-lock:default:"  # redis: ShedLock's job-lock:<environment>:


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


_VIEWS = frozenset({"HolderKind", "AlertKind", "Holder", "SlotReport", "Alert", "DuplicateGroup",
                    "JobStatus", "Snapshot"})  # fmt: skip


def __getattr__(name: str) -> Any:
    """The console's values live in `views` (the run path never loads them); found here too."""
    if name in _VIEWS:
        from lockconsole.model import views

        return getattr(views, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
