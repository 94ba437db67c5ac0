"""The holder journal: who was seen holding which lock, and when, kept in the ledger's database.

A database knows only its present holders. Every long-running lockconsole process that samples
them (the console, the metrics exporter, `schedule`) writes their transitions here: a row when a
holding is first seen, closed when a sample no longer shows it. A row keeps what the sampler saw
(database, lock key and its job, pid, application, client, user, mode) and four times, all the
ledger server's clock:

- `seen_after`: the last sample without the holding, before it appeared (None: no sample before);
- `first_seen` and `last_seen`: the first and the last samples that saw it held;
- `gone_by`: the first sample without it.

So the lock was surely held from first_seen to last_seen, and at most from seen_after to gone_by:
the uncertainty of sampling, said as it is. Several samplers at once keep one row per holding:
`(holding, open_mark)` is a unique key, `open_mark` is 1 while the row is open and NULL once
closed (NULLs never collide), and an appearance is an upsert that keeps the earliest sighting.
A closing sampler only closes an open row; one that comes second finds nothing to close.

Writing costs at most one statement per refresh and journal database on PostgreSQL (the closes
ride in the upsert's statement as a CTE) and two elsewhere, and nothing when nothing changed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.backends.ledger.schema import JOURNAL_TABLE, schema
from lockconsole.backends.ledger.timestamps import from_db, to_db
from lockconsole.model.views import Holder, JournalEntry

# Holdings closed after at most this long are found by `held_at` through the index on their
# earliest possible start (a window of this width before the moment asked); longer ones
# (stale holders, a session kept for days) through the index on their span. Both stay small.
LONG_HOLD = 3600.0  # seconds
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def epoch(moment: datetime) -> float:
    """Seconds since the epoch of an aware datetime (exact for microseconds)."""
    return (moment - _EPOCH) / timedelta(seconds=1)


def identity(holder: Holder) -> tuple[object, ...]:
    """One holding of one lock: the lock (database, kind, where read, key) and who holds it
    (pid with its session's start, or a lease's owner). Cheap: compared on every sample."""
    h = holder
    return (h.database, h.kind, h.source, h.key, h.pid, h.backend_start, h.locked_by)


def holding_of(holder: Holder) -> str:
    """The journal's key of a holding: a hash of its identity (the same in every sampler)."""
    parts = identity(holder)
    text = "\x1f".join("" if p is None else p.isoformat() if isinstance(p, datetime) else str(p)
                       for p in parts)  # fmt: skip
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class Appeared:
    """Holdings a sampler saw for the first time in one sample of one database."""

    holders: Sequence[Holder]
    seen_after: datetime | None  # its sample before, which did not show them
    first_seen: datetime  # this sample


@dataclass(frozen=True)
class Gone:
    """Holdings a sampler no longer saw in one sample of one database."""

    holdings: Sequence[str]
    # its sample before, which showed them; None: rows it adopts from a sampler that stopped
    # (it never saw them), whose last sure sighting is their first_seen
    last_seen: datetime | None
    gone_by: datetime  # this sample


def _cut(value: object, size: int) -> str | None:
    return None if value is None else str(value)[:size]


def _row(holder: Holder, holding: str, seen_after: datetime | None, first: datetime) -> dict:
    h = holder
    # the earliest it can have been taken: the sample before that did not show it, else when
    # the database says it was taken (a lease, a Redis value), else its session's start
    earliest = seen_after or h.held_since or h.backend_start or first
    return {
        "holding": holding,
        "database_name": _cut(h.database, 128),
        "kind": h.kind,
        "source": _cut(h.source, 64),
        "lock_key": _cut(h.key, 255),
        "job": _cut(h.job, 128),
        "pid": h.pid,
        "application": _cut(h.application_name, 255),
        "client": _cut(h.client_addr, 255),
        "username": _cut(h.user, 255),
        "mode": _cut(h.mode, 64),
        "locked_by": _cut(h.locked_by, 255),
        "session_start": h.backend_start,
        "seen_after": seen_after,
        "first_seen": first,
        "from_epoch": epoch(earliest),
    }


def ensure_journal(engine: Any) -> None:
    """Create the journal's table if it is missing (the ledger's other tables are not touched)."""
    metadata, _ = schema()
    metadata.tables[JOURNAL_TABLE].create(engine, checkfirst=True)


def has_journal(engine: Any) -> bool:
    from sqlalchemy import inspect

    return bool(inspect(engine).has_table(JOURNAL_TABLE))


_ROW_FIELDS = (
    "holding", "database_name", "kind", "source", "lock_key", "job", "pid", "application",
    "client", "username", "mode", "locked_by", "session_start", "seen_after", "first_seen",
    "from_epoch",
)  # fmt: skip
_TIME_FIELDS = ("session_start", "seen_after", "first_seen")


def record(engine: Any, appeared: Iterable[Appeared], gone: Iterable[Gone]) -> dict[str, datetime]:
    """Write one sample's transitions in one transaction; the journal's first_seen of every
    holding that appeared (another sampler may have seen it first). The statements' texts do
    not depend on how many rows they carry: each is parsed once, whatever the churn."""
    from lockconsole.backends import sqlfiles

    rows: dict[str, dict] = {}
    for sample in appeared:
        for holder in sample.holders:
            holding = holding_of(holder)
            rows.setdefault(holding, _row(holder, holding, sample.seen_after, sample.first_seen))
    # one order for every sampler (rows are locked in it): two samplers writing the same
    # holdings at once wait for each other instead of deadlocking
    new = [rows[h] for h in sorted(rows)]
    closes = [g for g in gone if g.holdings]
    dialect = "mysql" if engine.dialect.name in ("mysql", "mariadb") else engine.dialect.name
    found: list[Any] = []
    with engine.begin() as conn:
        if dialect == "postgresql":
            if new or closes:
                params = _columns(new)
                params.update(_gone_columns(closes))
                found = list(conn.exec_driver_sql(sqlfiles.load("record_journal", dialect), params))
        else:
            for batch in closes:
                common = {
                    "last_seen": to_db(batch.last_seen, dialect),
                    "gone_by": to_db(batch.gone_by, dialect),
                    "gone_epoch": epoch(batch.gone_by),
                }
                close = sqlfiles.load("close_journal", dialect)
                if dialect == "mysql":
                    conn.exec_driver_sql(
                        close, {**common, "holdings": tuple(sorted(batch.holdings))}
                    )
                else:
                    each = [{**common, "holding": h} for h in sorted(batch.holdings)]
                    conn.exec_driver_sql(close, each)
            if new:
                stored = [{k: to_db(v, dialect) if k in _TIME_FIELDS else v for k, v in r.items()}
                          for r in new]  # fmt: skip
                conn.exec_driver_sql(sqlfiles.load("upsert_journal", dialect), stored)
                select = sqlfiles.load("select_journal_first_seen", dialect)
                if dialect == "mysql":
                    found = list(conn.exec_driver_sql(select, {"holdings": tuple(rows)}))
                else:
                    for holding in rows:
                        found += list(conn.exec_driver_sql(select, {"holding": holding}))
    return {holding: from_db(seen) for holding, seen in found}  # type: ignore[misc]


def _columns(rows: list[dict]) -> dict[str, list]:
    """The rows as one array per column (PostgreSQL's unnest)."""
    return {f: [r[f] for r in rows] for f in _ROW_FIELDS}


def _gone_columns(batches: list[Gone]) -> dict[str, list]:
    holding: list[str] = []
    last: list[datetime | None] = []
    by: list[datetime] = []
    at: list[float] = []
    for batch in batches:
        for h in sorted(batch.holdings):
            holding.append(h)
            last.append(batch.last_seen)
            by.append(batch.gone_by)
            at.append(epoch(batch.gone_by))
    return {"gone_holding": holding, "gone_last": last, "gone_by": by, "gone_epoch": at}


def open_holdings(engine: Any, database: str) -> set[str]:
    """The holdings of `database` that the journal has open: what samplers saw held last."""
    from sqlalchemy import select

    metadata, _ = schema()
    t = metadata.tables[JOURNAL_TABLE]
    query = select(t.c.holding).where(t.c.open_mark == 1, t.c.database_name == database[:128])
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(query)}


def held_at(
    engine: Any,
    at: datetime,
    *,
    key: str | None = None,
    job: str | None = None,
    database: str | None = None,
    limit: int = 1000,
) -> list[JournalEntry]:
    """Every holding that may have held its lock at `at` (of that key, job or database)."""
    return seen_between(engine, at, at, key=key, job=job, database=database, limit=limit)


def seen_between(
    engine: Any,
    since: datetime,
    until: datetime,
    *,
    key: str | None = None,
    keys: Sequence[str] = (),
    job: str | None = None,
    database: str | None = None,
    limit: int = 1000,
) -> list[JournalEntry]:
    """Every holding that may have held its lock at some moment of [since, until]: taken at
    the earliest (seen_after, else first_seen) by `until`, and still open or gone after `since`.
    Three index reads: the open rows, the short holdings by their earliest start (a LONG_HOLD
    window), the long ones by their span. Oldest first."""
    from sqlalchemy import and_, select, union_all

    metadata, _ = schema()
    t = metadata.tables[JOURNAL_TABLE]
    lo, hi = epoch(since), epoch(until)
    filters = []
    for column, value in (("lock_key", key), ("job", job), ("database_name", database)):
        if value is not None:
            filters.append(t.c[column] == value)
    if keys:
        filters.append(t.c.lock_key.in_(list(keys)))
    started = t.c.from_epoch <= hi
    after = t.c.gone_by > since
    short = t.c.held_seconds <= LONG_HOLD
    parts = [
        and_(t.c.open_mark == 1, started),
        and_(t.c.from_epoch >= lo - LONG_HOLD, started, short, after),
        and_(t.c.held_seconds > LONG_HOLD, started, after),
    ]
    query = union_all(*(select(t).where(part, *filters) for part in parts))
    with engine.connect() as conn:
        found = [_entry(row._mapping) for row in conn.execute(query)]
    found.sort(key=lambda e: (e.first_seen, e.database, e.key, e.id))
    return found[:limit]


def _entry(row: Any) -> JournalEntry:
    return JournalEntry(
        id=int(row["id"]),
        database=row["database_name"],
        kind=row["kind"],
        source=row["source"],
        key=row["lock_key"],
        job=row["job"],
        pid=row["pid"],
        application=row["application"],
        client=row["client"],
        user=row["username"],
        mode=row["mode"],
        locked_by=row["locked_by"],
        session_start=from_db(row["session_start"]),
        seen_after=from_db(row["seen_after"]),
        first_seen=from_db(row["first_seen"]),  # type: ignore[arg-type]
        last_seen=from_db(row["last_seen"]),
        gone_by=from_db(row["gone_by"]),
        earliest=_EPOCH + timedelta(seconds=row["from_epoch"]),
    )
