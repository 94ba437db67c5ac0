"""The ledger's report reads as SQLAlchemy Core queries, over the columns the table really has.

A read-only process never creates or alters a table: it reads what exists. A ledger made by an
older release lacks the columns added since (they read as None), and a database where nothing
ran yet has no ledger table at all (no runs, and `missing` says so).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockconsole.backends.ledger.schema import TABLE, schema
from lockconsole.backends.ledger.timestamps import to_db
from lockconsole.model.jobs import GOT_LOCK

if TYPE_CHECKING:  # the run path imports this module, and never needs the views
    from lockconsole.model.views import RunFilter


def present_columns(engine: Any) -> set[str] | None:
    """The run ledger's columns as the database has them; None when there is no table."""
    from sqlalchemy import inspect

    found = inspect(engine)
    if not found.has_table(TABLE):
        return None
    return {column["name"] for column in found.get_columns(TABLE)}


def _columns(present: set[str] | None) -> list[Any]:
    _, table = schema()
    return [c for c in table.columns if present is None or c.name in present]


def newest(
    present: set[str] | None,
    job: str | None,
    *,
    dialect: str,
    since: datetime | None = None,
    limit: int = 200,
    where: RunFilter | None = None,
) -> Any:
    """Attempts newest first: of one job or all, started at or after `since`, kept by `where`."""
    from sqlalchemy import select

    _, table = schema()
    query = select(*_columns(present))
    if job is not None:
        query = query.where(table.c.job == job)
    for moment in (since, *((where.since, where.until, where.slot) if where else ())):
        if moment is not None:
            to_db(moment, dialect)  # refuse a naive datetime before asking the server
    if since is not None:
        query = query.where(table.c.started_at >= since)
    if where is not None:
        for column, value in (("instance", where.instance), ("outcome", where.outcome)):
            if value is not None:
                query = query.where(table.c[column] == value)
        if where.since is not None:
            query = query.where(table.c.started_at >= where.since)
        if where.until is not None:
            query = query.where(table.c.started_at < where.until)
        if where.slot is not None:
            query = query.where(table.c.slot == where.slot)
    return query.order_by(table.c.started_at.desc(), table.c.id.desc()).limit(int(limit))


def of_slot(present: set[str] | None, job: str, slot: datetime, dialect: str) -> Any:
    """Every attempt of `job` at `slot`, oldest first."""
    from sqlalchemy import select

    _, table = schema()
    to_db(slot, dialect)
    query = select(*_columns(present)).where(table.c.job == job, table.c.slot == slot)
    return query.order_by(table.c.started_at, table.c.id)


# -- slot judgment: the ledger aggregates, per (job, slot), over the whole lookback ---------

# the outcomes that held the lock, in a fixed order so that the statement text never varies
LOCKED_OUTCOMES = tuple(sorted(GOT_LOCK))


def slot_tallies(jobs: list[str], since: datetime, dialect: str) -> Any:
    """One row per (job, slot, manual) of `jobs` with a slot at or after `since`: how many
    attempts took the lock, skipped or found the job paused, the first start, and the one
    execution's columns (exact when `executed` is 1; a slot with more is read per attempt).

    Served by the (job, slot) index: a range of slots for each job named."""
    from sqlalchemy import case, func, literal, select

    _, table = schema()
    to_db(since, dialect)
    c = table.c
    got = c.outcome.in_(LOCKED_OUTCOMES)
    manual = case((c.trigger == "manual", 1), else_=0).label("manual")

    def count(condition: Any, name: str) -> Any:
        return func.sum(case((condition, 1), else_=0)).label(name)

    def of_execution(column: Any) -> Any:
        return func.max(case((got, column), else_=literal(None, column.type))).label(column.name)

    query = select(
        c.job,
        c.slot,
        manual,
        count(got, "executed"),
        count(c.outcome == "skipped", "skipped"),
        count(c.outcome == "paused", "paused"),
        func.min(c.started_at).label("earliest"),
        *(of_execution(c[name]) for name in ("id", "instance", "outcome")),
        *(of_execution(c[name]) for name in ("started_at", "finished_at")),
    )
    query = query.where(c.job.in_(jobs), c.slot >= since)
    return query.group_by(c.job, c.slot, manual)


def of_slots(present: set[str] | None, job: str, slots: list[datetime], dialect: str) -> Any:
    """Every attempt of `job` at any of `slots`, oldest first."""
    from sqlalchemy import select

    _, table = schema()
    for slot in slots:
        to_db(slot, dialect)
    query = select(*_columns(present)).where(table.c.job == job, table.c.slot.in_(slots))
    return query.order_by(table.c.started_at, table.c.id)


def newest_of_each(present: set[str] | None, jobs: list[str], outcome: str | None = None) -> Any:
    """Each job's newest attempt by slot (with `outcome` only, when given): one row per job.

    Two index probes per job, however many rows the job or the ledger holds: the job's newest
    slot is `max(slot)` read from the end of the (job, slot) index (with `outcome`: of the
    (job, outcome, slot) index), then the few attempts of that one slot are ordered. Ordering
    the job's rows by (slot, started_at, id) directly would make MariaDB sort every row of the
    job (the index does not hold started_at), and PostgreSQL walk back over every attempt
    newer than the job's newest with `outcome` (all of them, for a job that never succeeded).
    """
    from sqlalchemy import func, select, union_all

    _, table = schema()
    c = table.c
    parts = []
    for job in jobs:
        keep = [c.job == job] if outcome is None else [c.job == job, c.outcome == outcome]
        newest_slot = select(func.max(c.slot)).where(*keep).scalar_subquery()
        one = select(*_columns(present)).where(*keep, c.slot == newest_slot)
        newest = one.order_by(c.started_at.desc(), c.id.desc()).limit(1)
        part = newest.subquery()
        parts.append(select(*part.c))
    return parts[0] if len(parts) == 1 else union_all(*parts)


def first_slots(jobs: list[str]) -> Any:
    """Each job's first slot in the ledger, one index probe per job (None: never attempted)."""
    from sqlalchemy import func, select

    _, table = schema()
    c = table.c
    return select(
        *(
            select(func.min(c.slot)).where(c.job == job).scalar_subquery().label(f"j{i}")
            for i, job in enumerate(jobs)
        )
    )


def attempt_counts(jobs: list[str], since: datetime, dialect: str) -> Any:
    """Attempts of `jobs` with a slot at or after `since`, counted per (job, outcome,
    instance) on the (job, slot) index."""
    from sqlalchemy import func, select

    _, table = schema()
    to_db(since, dialect)
    c = table.c
    query = select(c.job, c.outcome, c.instance, func.count().label("attempts"))
    query = query.where(c.job.in_(jobs), c.slot >= since)
    return query.group_by(c.job, c.outcome, c.instance)
