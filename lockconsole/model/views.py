"""What the console shows, as frozen values: lock holders, slot reports, alerts, duplicate
groups, job status and the snapshot that holds them all.

Kept apart from `jobs` (what the run path needs) so that `lockconsole run` does not pay for
defining them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from lockconsole.model.jobs import Job, Pause, Run

HolderKind = Literal["advisory", "user_lock", "lease", "redis"]
# How a holder's held_since is known: the database says when it was taken ("database": a
# lease's locked_at, a Redis value's time, MariaDB's lock time), the ledger's run that took it
# started then ("run"), its transaction started then ("transaction": pg-xact), or it is a lower
# bound ("at_least": when the console first saw it, or the end of its idle session's last
# statement, whichever is earlier).
HeldFrom = Literal["database", "run", "transaction", "at_least"]
SlotStatus = Literal[
    "ok", "running", "retried", "double_run", "missed", "paused", "lock_lost", "failed"
]
AlertKind = Literal[
    "double_run",
    "missed",
    "lock_lost",
    "failed",
    "stale_holder",
    "duplicates",
    "pooler",
    "overlap",
    "abandoned",
    "clock_skew",
]


@dataclass(frozen=True)
class RunFilter:
    """Which attempts a history read keeps (each None: any); the database applies it."""

    instance: str | None = None
    outcome: str | None = None
    since: datetime | None = None  # started at or after
    until: datetime | None = None  # started before
    slot: datetime | None = None


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
    held_from: HeldFrom | None = None  # how held_since is known (None: not at all)
    first_seen: datetime | None = None  # when this console first saw this holder
    lock_until: datetime | None = None  # leases
    locked_by: str | None = None  # leases
    fencing_token: int | None = None  # leases
    value: str | None = None  # redis: the key's value as read (force-release compares it)
    instance: str | None = None  # from the ledger, for our own runs
    run_id: int | None = None
    hidden: str | None = None  # what privileges hide, and which privilege would reveal it
    stale: str | None = None  # why this holder looks stale, for an operator


@dataclass(frozen=True)
class AuditEntry:
    """One audited action: a force-release, a trigger, a pause, a request, a prune."""

    id: int
    at: datetime
    os_user: str
    host: str
    action: str
    database: str
    target: str
    result: str
    message: str | None
    job: str | None = None


@dataclass(frozen=True)
class JournalEntry:
    """One holding as the holder journal keeps it: surely held from first_seen to last_seen
    (None: still held when last sampled), and at most from `earliest` to gone_by."""

    id: int
    database: str
    kind: str
    source: str
    key: str
    job: str | None
    pid: int | None
    application: str | None
    client: str | None
    user: str | None
    mode: str | None
    locked_by: str | None
    session_start: datetime | None
    seen_after: datetime | None
    first_seen: datetime
    last_seen: datetime | None
    gone_by: datetime | None
    earliest: datetime  # the earliest it can have been taken (seen_after, else as known)

    @property
    def open(self) -> bool:
        """Still held at the last sample that wrote the journal."""
        return self.gone_by is None


@dataclass(frozen=True)
class SlotReport:
    """What happened to one job in one slot, across every instance."""

    job: str
    slot: datetime
    acquired: int  # attempts that got the lock (running, succeeded, failed or lock_lost)
    skipped: int
    outcomes: tuple[tuple[str, str], ...]  # (instance, outcome), in start order
    status: SlotStatus
    overlap: float = 0.0  # seconds: the longest time two of its executions ran at once


@dataclass(frozen=True)
class Alert:
    """Something an operator must look at. Its message may change while it lasts (an idle time
    counting up, an overlap growing); its key does not."""

    kind: AlertKind
    job: str | None
    message: str
    slot: datetime | None = None
    database: str | None = None
    # what the alert is about when the job, slot and database do not say it: a holder's
    # session, an instance
    subject: str | None = None

    @property
    def key(self) -> tuple[object, ...]:
        """The same for one alert all along: what it is of, never how its message reads."""
        return (self.kind, self.job, self.slot, self.database, self.subject)


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
    pause: Pause | None = None  # set while an operator has paused the job
    last_success: Run | None = None  # its newest succeeded attempt (by index, any age)


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
    duplicates: tuple[tuple[str, int, int], ...] = ()  # (job, duplicate groups, surplus rows)
    read_seconds: tuple[tuple[str, float], ...] = ()  # (database, how long its reads took)
    attempts: tuple[tuple[str, str, str, int], ...] = ()  # (job, outcome, instance, count)


@dataclass(frozen=True)
class StoryEvent:
    """One line of a slot's story: when, from which source, who, what (data, not escaped)."""

    at: datetime
    source: str  # "attempt", "holder", "audit"
    who: str
    what: str


@dataclass(frozen=True)
class SlotStory:
    """Everything known of one slot of one job (console/story.py), and what could not be read."""

    job: str
    slot: datetime
    ledger: str
    taken_at: datetime  # the ledger server's time when the story was read
    since: datetime  # the window holders and audit were read in
    until: datetime
    attempts: tuple[Run, ...] = ()
    outputs: tuple[tuple[int, str], ...] = ()  # (run id, output tail)
    holders: tuple[JournalEntry, ...] = ()
    audit: tuple[AuditEntry, ...] = ()
    alerts: tuple[Alert, ...] = ()
    duplicates: tuple[DuplicateGroup, ...] = ()
    status: str = "skipped"  # the slot's status by the one rule
    overlap: float = 0.0  # seconds two executions ran at once
    verdict: str = ""
    unknown: tuple[tuple[str, str], ...] = ()  # (part, why it could not be read)
    events: tuple[StoryEvent, ...] = ()
