"""The ledger's report reads as SQLAlchemy Core queries, over the columns the table really has.

A read-only process never creates or alters a table: it reads what exists. A ledger made by an
older release lacks the columns added since (they read as None), and a database where nothing
ran yet has no ledger table at all (no runs, and `missing` says so).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockconsole.backends.ledger.schema import TABLE, schema
from lockconsole.backends.ledger.times import to_db

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
