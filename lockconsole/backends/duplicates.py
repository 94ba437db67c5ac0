"""Idempotency inspector: the duplicate keys of a job's effect table, counted by the database.

For a spec like invoices(tenant_id, period), on PostgreSQL, MySQL/MariaDB and SQLite, with
SQLAlchemy Core quoting the (checked) names:

    summary(engine, spec)             -> DuplicateSummary(groups, surplus_rows, has_unique_key)
    groups(engine, spec, page=0)      -> DuplicatePage(groups, has_more); after=key: keyset paging
    rows(engine, spec, key)           -> the rows of one group, as dicts
    fix_ddl("postgresql", spec, sum)  -> the DDL that adds the missing unique key
    export_csv(engine, spec, path)    -> every duplicate row to CSV, streamed

A page is `SELECT key, count(*) ... GROUP BY key HAVING count(*) > 1 ORDER BY key LIMIT n`; with a
run_column, that query becomes a subquery joined back to the table for each group's distinct
run ids, in the same round trip. Rows with a NULL key column are never duplicates (a unique key
allows them). The first argument is an Engine (reused) or a Database (an engine per call). A
missing table or column raises ConfigError naming it; other database failures DatabaseError.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import IO, Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import Connection, Engine, Select, and_, column, func, inspect, select
from sqlalchemy.exc import NoSuchTableError, SQLAlchemyError
from sqlalchemy.sql.elements import ColumnElement

from lockconsole.backends.connect import first_line
from lockconsole.backends.sa import engine_for
from lockconsole.config.loader import check_column, check_identifier
from lockconsole.config.urls import parse_url, redact, scrub
from lockconsole.idempotency import unique_key_ddl
from lockconsole.model.errors import ConfigError, DatabaseError
from lockconsole.model.jobs import Database, Idempotency
from lockconsole.model.views import DuplicateGroup

ROWS_LIMIT = 1000  # rows shown of one group
EXPORT_BATCH = 1000  # rows fetched per round trip while exporting
T = TypeVar("T")


@dataclass(frozen=True)
class DuplicateSummary:
    """Duplicated keys, surplus rows (sum of count - 1), and whether a unique key exists."""

    groups: int
    surplus_rows: int
    has_unique_key: bool | None  # None: the database would not say


@dataclass(frozen=True)
class DuplicatePage:
    """One page of duplicate groups in key order; has_more when another page follows."""

    groups: tuple[DuplicateGroup, ...]
    has_more: bool


class _Spec:
    """The spec as SQLAlchemy Core clauses: a lightweight table with only the needed columns."""

    def __init__(self, spec: Idempotency) -> None:
        self.label = check_identifier(spec.table)
        if isinstance(spec.key, str) or not spec.key:
            raise ValueError("the idempotency key is a non-empty list of column names")
        names = [check_column(c) for c in spec.key]
        run = check_column(spec.run_column) if spec.run_column else None
        self.columns = names + ([run] if run and run not in names else [])
        schema, _, self.name = self.label.rpartition(".")
        self.schema = schema or None
        self.table = sa.table(self.name, *[column(c) for c in self.columns], schema=self.schema)
        self.key = [self.table.c[c] for c in names]
        self.run = self.table.c[run] if run else None
        self.ordered = self.duplicated().order_by(*self.key)  # built once: a page stays cheap

    def duplicated(self, key: Sequence[Any] | None = None) -> Any:
        """SELECT key, count(*) ... GROUP BY key HAVING count(*) > 1 (on `key` columns)."""
        cols = key if key is not None else self.key
        return (
            select(*cols, func.count().label("lockconsole_count"))
            .where(and_(*[c.is_not(None) for c in cols]))
            .group_by(*cols)
            .having(func.count() > 1)
        )

    def in_duplicated(self) -> ColumnElement[bool]:
        """key IN (the duplicated keys), for selecting every duplicate row."""
        inner = self.table.alias("duplicated")
        cols = [inner.c[c.name] for c in self.key]
        keys = self.duplicated(cols).with_only_columns(*cols)
        return (self.key[0] if len(self.key) == 1 else sa.tuple_(*self.key)).in_(keys)


@lru_cache(maxsize=128)
def _spec(spec: Idempotency) -> _Spec:
    """The Core clauses of `spec`, built once per process."""
    return _Spec(spec)


def summary(engine_or_database: Engine | Database, spec: Idempotency) -> DuplicateSummary:
    """How many keys are duplicated, how many rows are surplus, and whether a unique key exists."""
    s = _spec(spec)

    def work(conn: Connection) -> DuplicateSummary:
        counts = s.duplicated().subquery("duplicates")
        surplus = func.coalesce(func.sum(counts.c.lockconsole_count - 1), 0)
        n, extra = conn.execute(select(func.count(), surplus).select_from(counts)).one()
        return DuplicateSummary(int(n), int(extra), _has_unique_key(conn, s))

    return _run(engine_or_database, s, work)


def groups(
    engine_or_database: Engine | Database,
    spec: Idempotency,
    *,
    page: int = 0,
    page_size: int = 50,
    after: tuple[Any, ...] | None = None,
) -> DuplicatePage:
    """Duplicate groups in key order: page `page` (counted from `after`, when given)."""
    s = _spec(spec)
    if page < 0 or page_size < 1:
        raise ValueError("page must be >= 0 and page_size >= 1")
    if after is not None and len(after) != len(s.key):
        raise ValueError(f"after must have {len(s.key)} values, one per key column")

    def work(conn: Connection) -> DuplicatePage:
        stmt = s.ordered.limit(page_size + 1)
        if page:
            stmt = stmt.offset(page * page_size)
        if after is not None:
            stmt = stmt.where(_after(s, after))
        if s.run is not None:
            stmt = _with_run_ids(s, stmt)
        found: dict[tuple[Any, ...], tuple[int, set[Any]]] = {}
        width = len(s.key)
        for row in conn.execute(stmt):
            runs = found.setdefault(tuple(row[:width]), (int(row[width]), set()))[1]
            if s.run is not None and row[-1] is not None:
                runs.add(row[-1])
        out = tuple(DuplicateGroup(k, n, _sorted(r)) for k, (n, r) in found.items())
        return DuplicatePage(out[:page_size], len(out) > page_size)

    return _run(engine_or_database, s, work)


def groups_of_runs(
    engine_or_database: Engine | Database,
    spec: Idempotency,
    run_ids: Sequence[int],
    *,
    limit: int = 200,
) -> list[DuplicateGroup]:
    """The duplicate groups whose rows carry one of `run_ids` in the run column (compared as
    text, whatever the column's type), with every run id of each group; at most `limit`."""
    s = _spec(spec)
    if s.run is None or not run_ids:
        return []

    def work(conn: Connection) -> list[DuplicateGroup]:
        carriers = s.table.alias("carriers")
        cols = [carriers.c[c.name] for c in s.key]
        ids = [str(i) for i in run_ids]
        assert s.run is not None
        mine = select(*cols).where(sa.cast(carriers.c[s.run.name], sa.String).in_(ids))
        key = s.key[0] if len(s.key) == 1 else sa.tuple_(*s.key)
        stmt = _with_run_ids(s, s.ordered.where(key.in_(mine)).limit(limit))
        found: dict[tuple[Any, ...], tuple[int, set[Any]]] = {}
        width = len(s.key)
        for row in conn.execute(stmt):
            runs = found.setdefault(tuple(row[:width]), (int(row[width]), set()))[1]
            if row[-1] is not None:
                runs.add(row[-1])
        return [DuplicateGroup(k, n, _sorted(r)) for k, (n, r) in found.items()]

    return _run(engine_or_database, s, work)


def rows(
    engine_or_database: Engine | Database,
    spec: Idempotency,
    key: tuple[Any, ...],
    *,
    limit: int = ROWS_LIMIT,
) -> list[dict[str, Any]]:
    """The rows (all columns) with this key, in primary-key order, at most `limit`."""
    s = _spec(spec)
    if len(key) != len(s.key):
        raise ValueError(f"key must have {len(s.key)} values, one per key column")

    def work(conn: Connection) -> list[dict[str, Any]]:
        stmt = (
            _every_column()
            .select_from(s.table)
            .where(and_(*[c == v for c, v in zip(s.key, key, strict=True)]))
            .order_by(*[column(c) for c in _primary_key(conn, s)])
            .limit(limit)
        )
        return [dict(r) for r in conn.execute(stmt).mappings()]

    return _run(engine_or_database, s, work)


def fix_ddl(dialect: str, spec: Idempotency, found: DuplicateSummary | None = None) -> str:
    """The DDL adding the unique key, with a comment when duplicates must be removed first."""
    ddl = unique_key_ddl(dialect, spec.table, spec.key) + ";"
    cols = ", ".join(spec.key)
    if found is not None and found.has_unique_key:
        return f"-- {spec.table} already has a unique key on ({cols}); nothing to add\n-- {ddl}"
    if found is None:
        note = f"-- this fails while {spec.table} holds duplicate ({cols}) keys: remove them first"
    elif found.groups:
        note = (
            f"-- remove the {found.surplus_rows} surplus rows of the {found.groups} duplicated "
            f"({cols}) keys first: this fails while they exist"
        )
    else:
        return ddl
    return f"{note}\n{ddl}"


def export_csv(
    engine_or_database: Engine | Database, spec: Idempotency, path_or_file: str | os.PathLike | IO
) -> int:
    """Write every row of every duplicate group (header first) to CSV; return the row count."""
    s = _spec(spec)

    def work(conn: Connection) -> int:
        stmt = (
            _every_column()
            .select_from(s.table)
            .where(s.in_duplicated())
            .order_by(*s.key, *[column(c) for c in _primary_key(conn, s)])
        )
        streamed = conn.execution_options(stream_results=True, yield_per=EXPORT_BATCH)
        result = streamed.execute(stmt)
        if isinstance(path_or_file, str | os.PathLike):
            with open(path_or_file, "w", newline="", encoding="utf-8") as f:
                return _write_csv(f, result)
        return _write_csv(path_or_file, result)

    return _run(engine_or_database, s, work, reads=False)  # a server-side cursor needs BEGIN


# -- helpers ------------------------------------------------------------------------------


def _write_csv(f: IO, result: Any) -> int:
    from lockconsole.text.safe import csv_cell

    writer = csv.writer(f)
    names = list(result.keys())
    writer.writerow([csv_cell(name) for name in names])
    count = 0
    for batch in result.partitions():  # text a spreadsheet would run as a formula is quoted
        writer.writerows([csv_cell(v) for v in row] for row in batch)
        count += len(batch)
    return count


def _after(s: _Spec, after: tuple[Any, ...]) -> ColumnElement[bool]:
    """key > after; the leading `first >= a` lets MySQL use an index range too."""
    if len(s.key) == 1:
        return s.key[0] > after[0]
    return and_(s.key[0] >= after[0], sa.tuple_(*s.key) > sa.tuple_(*after))


def _with_run_ids(s: _Spec, page: Any) -> Any:
    """The page (a LIMITed subquery, planned alone) joined to the table for its run ids."""
    assert s.run is not None
    sub = page.subquery("page")
    p = list(sub.c)
    t = s.table.alias("t")
    on = and_(*[t.c[c.name] == pc for c, pc in zip(s.key, p, strict=False)])
    run = t.c[s.run.name]
    return (
        select(*p, run)
        .distinct()
        .select_from(sub.outerjoin(t, and_(on, run.is_not(None))))
        .order_by(*p[:-1])
    )


def _sorted(values: set[Any]) -> tuple[Any, ...]:
    return tuple(sorted(values, key=lambda v: (str(type(v)), v)))


def _primary_key(conn: Connection, s: _Spec) -> list[str]:
    """The table's primary-key columns (for a stable row order); [] if it has none."""
    try:
        pk = inspect(conn).get_pk_constraint(s.name, schema=s.schema)
    except NoSuchTableError:
        return []  # the query that follows fails and says so
    return list(pk.get("constrained_columns") or [])


def _every_column() -> Select[Any]:
    """SELECT *: the table's columns are whatever it has."""
    return select(sa.literal_column("*"))


def _has_unique_key(conn: Connection, s: _Spec) -> bool | None:
    """True when a primary key, unique constraint or full unique index covers exactly the key."""
    fold: Callable[[str], str] = (
        (lambda n: n) if conn.dialect.name == "postgresql" else str.casefold
    )
    want = {fold(c.name) for c in s.key}
    try:
        insp = inspect(conn)
        pk = insp.get_pk_constraint(s.name, schema=s.schema).get("constrained_columns")
        sets: list[Sequence[str | None]] = [pk or []]
        sets += [u["column_names"] for u in insp.get_unique_constraints(s.name, schema=s.schema)]
        for ix in insp.get_indexes(s.name, schema=s.schema):
            options = ix.get("dialect_options", {})
            partial = any(k.endswith("_where") and v is not None for k, v in options.items())
            if ix.get("unique") and not partial:
                sets.append(ix["column_names"])
    except (SQLAlchemyError, NotImplementedError):
        return None
    return any(
        cols and None not in cols and {fold(c) for c in cols if c is not None} == want
        for cols in sets
    )


def _run(
    target: Engine | Database, s: _Spec, work: Callable[[Connection], T], *, reads: bool = True
) -> T:
    """Run `work` on a connection; turn database errors into ConfigError or DatabaseError."""
    engine = target if isinstance(target, Engine) else engine_for(target.url)
    try:
        try:
            conn = engine.connect()
            if reads and engine.dialect.name == "postgresql":  # no BEGIN/ROLLBACK round trips
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        except SQLAlchemyError as exc:
            raise _database_error(engine, exc) from None
        failure: SQLAlchemyError
        with conn:
            try:
                return work(conn)
            except SQLAlchemyError as exc:
                failure = exc
        raise _diagnose(engine, s, failure) from None
    finally:
        if engine is not target:
            engine.dispose()


def _diagnose(engine: Engine, s: _Spec, exc: SQLAlchemyError) -> Exception:
    """A ConfigError when the table or a column is missing, else a DatabaseError."""
    try:
        insp = inspect(engine)
        if not insp.has_table(s.name, schema=s.schema):
            where = redact(engine.url.render_as_string(hide_password=True))
            return ConfigError(f"table {s.label} does not exist in {where}")
        names = [c["name"] for c in insp.get_columns(s.name, schema=s.schema)]
    except SQLAlchemyError:
        return _database_error(engine, exc)
    fold = (lambda n: n) if engine.dialect.name == "postgresql" else str.casefold
    have = {fold(n) for n in names}
    for c in s.columns:
        if fold(c) not in have:
            listed = ", ".join(names[:20]) + (", ..." if len(names) > 20 else "")
            return ConfigError(f"table {s.label} has no column {c!r} (it has: {listed})")
    return _database_error(engine, exc)


def _database_error(engine: Engine, exc: BaseException) -> DatabaseError:
    """One line naming the database (password masked) and what it said."""
    text = first_line(getattr(exc, "orig", None) or exc)
    if engine.url.password:  # drivers may echo the DSN; scrub() also catches its quoted form
        text = scrub(text, parse_url(engine.url.render_as_string(hide_password=False)))
    # SQLAlchemy hides only the user-info password: redact() masks ?password= and the rest
    return DatabaseError(redact(f"{engine.url.render_as_string(hide_password=True)}: {text}"))
