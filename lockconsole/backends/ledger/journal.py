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
from lockconsole.backends.ledger.times import from_db
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
        "open_mark": 1,
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


def record(engine: Any, appeared: Iterable[Appeared], gone: Iterable[Gone]) -> dict[str, datetime]:
    """Write one sample's transitions in one transaction; the journal's first_seen of every
    holding that appeared (another sampler may have seen it first)."""
    from sqlalchemy import func, update

    metadata, _ = schema()
    table = metadata.tables[JOURNAL_TABLE]
    rows: dict[str, dict] = {}
    for sample in appeared:
        for holder in sample.holders:
            holding = holding_of(holder)
            rows.setdefault(holding, _row(holder, holding, sample.seen_after, sample.first_seen))
    # one order for every sampler (rows are locked in it): two samplers writing the same
    # holdings at once wait for each other instead of deadlocking
    rows = dict(sorted(rows.items()))
    closes = []
    for batch in gone:
        if batch.holdings:
            closes.append(
                update(table)
                .where(table.c.open_mark == 1, table.c.holding.in_(sorted(batch.holdings)))
                .values(
                    open_mark=None,
                    last_seen=table.c.first_seen if batch.last_seen is None else batch.last_seen,
                    gone_by=batch.gone_by,
                    held_seconds=epoch(batch.gone_by) - table.c.from_epoch,
                )
            )
    dialect = engine.dialect.name
    least = func.least if dialect != "sqlite" else func.min
    first: dict[str, datetime] = {}
    with engine.begin() as conn:
        if rows and dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            ins = pg_insert(table).values(list(rows.values()))
            upsert = ins.on_conflict_do_update(
                constraint="uq_lockconsole_journal_open",
                set_=_keep_earliest(table, ins.excluded, least),
            ).returning(table.c.holding, table.c.first_seen)
            for close in closes:  # in the upsert's own statement
                upsert = upsert.add_cte(close.cte())
            found = list(conn.execute(upsert).all())
        else:
            for close in closes:
                conn.execute(close)
            found = []
            if rows:
                found = _upsert_elsewhere(conn, table, list(rows.values()), dialect, least)
    for holding, seen in found:
        first[holding] = from_db(seen)  # type: ignore[assignment]
    return first


def _keep_earliest(table: Any, new: Any, least: Any) -> dict[str, Any]:
    """An appearance another sampler already wrote keeps the earliest sighting of the two."""
    from sqlalchemy import case

    earlier = new.first_seen < table.c.first_seen
    return {
        "seen_after": case((earlier, new.seen_after), else_=table.c.seen_after),
        "first_seen": least(table.c.first_seen, new.first_seen),
        "from_epoch": least(table.c.from_epoch, new.from_epoch),
    }


def _upsert_elsewhere(conn: Any, table: Any, rows: list[dict], dialect: str, least: Any) -> list:
    from sqlalchemy import select

    if dialect == "mysql":
        from sqlalchemy.dialects.mysql import insert as my_insert

        ins = my_insert(table).values(rows)
        new = ins.inserted
        conn.execute(ins.on_duplicate_key_update(
            # seen_after first: it compares the first_seen this statement has not changed yet
            [(k, v) for k, v in _keep_earliest(table, new, least).items()]
        ))  # fmt: skip
    else:
        from sqlalchemy.dialects.sqlite import insert as lite_insert

        lite = lite_insert(table).values(rows)
        conn.execute(
            lite.on_conflict_do_update(
                index_elements=["holding", "open_mark"],
                set_=_keep_earliest(table, lite.excluded, least),
            )
        )
    holdings = [r["holding"] for r in rows]
    query = select(table.c.holding, table.c.first_seen).where(
        table.c.open_mark == 1, table.c.holding.in_(holdings)
    )
    return list(conn.execute(query).all())


def open_holdings(engine: Any, database: str) -> set[str]:
    """The holdings of `database` that the journal has open: what samplers saw held last."""
    from sqlalchemy import select

    metadata, _ = schema()
    t = metadata.tables[JOURNAL_TABLE]
    query = select(t.c.holding).where(t.c.open_mark == 1, t.c.database_name == database[:128])
    with engine.connect() as conn:
        return {row[0] for row in conn.execute(query)}


def open_first_seen(engine: Any, holdings: Sequence[str]) -> dict[str, datetime]:
    """The journal's first_seen of those holdings that are open in it."""
    from sqlalchemy import select

    if not holdings:
        return {}
    metadata, _ = schema()
    table = metadata.tables[JOURNAL_TABLE]
    query = select(table.c.holding, table.c.first_seen).where(
        table.c.open_mark == 1, table.c.holding.in_(list(holdings))
    )
    with engine.connect() as conn:
        return {h: from_db(s) for h, s in conn.execute(query).all()}  # type: ignore[misc]


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
