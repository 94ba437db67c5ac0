"""The safety net under the lock: make a job's effect idempotent with a unique key.

A lock makes one instance run a slot; it cannot stop a crash-and-rerun, or a second holder
after a dropped connection, from charging a tenant twice. A unique key can:

    ALTER TABLE invoices ADD CONSTRAINT invoices_tenant_id_period_key UNIQUE (tenant_id, period)

and then every write goes through `claim`, which inserts the row only if no row with the same
key exists, and says which happened:

    from lockconsole.idempotency import claim

    if claim(conn, "invoices", {"tenant_id": 42, "period": "2026-11", "amount": 990},
             key=("tenant_id", "period")):
        charge(42)          # this call inserted the row: nobody else has billed 2026-11
    conn.commit()           # claim never commits for you (see below)

`claim(conn, table, values, key=None) -> bool`
    True if this call inserted the row, False if a row with the same key already existed.
    A duplicate never raises; every other error does. `conn` is a psycopg 3 connection, a
    PyMySQL connection, a sqlite3 connection, or a SQLAlchemy `Connection` (on any of the
    three). `key` names the unique key's columns (they must be in `values`); None means "any
    unique key of the table" (PostgreSQL/SQLite `ON CONFLICT DO NOTHING` without a target).
    Each dialect's native form:
      PostgreSQL  INSERT ... ON CONFLICT (key) DO NOTHING
      SQLite      INSERT ... ON CONFLICT (key) DO NOTHING (not INSERT OR IGNORE, which also
                  silences NOT NULL and CHECK failures)
      MySQL       INSERT ... ON DUPLICATE KEY UPDATE <first key column> = <first key column>,
                  not INSERT IGNORE: IGNORE turns other errors (truncated or invalid values,
                  NOT NULL, foreign keys) into warnings and writes a wrong row. The no-op
                  update reports 1 affected row for an insert and 0 for a duplicate, unless
                  the connection was opened with CLIENT_FOUND_ROWS (SQLAlchemy's mysql+pymysql
                  dialect always sets it), where a duplicate also reports 1. On such a
                  connection claim runs a plain INSERT and treats error 1062 (duplicate entry)
                  as False; MySQL/MariaDB roll back only that statement, not the transaction.
    On MySQL any unique key of the table counts as "the key"; on PostgreSQL and SQLite only
    `key` does (a violation of another unique key raises).
    Transactions: claim never commits or rolls back. On a connection in autocommit mode the
    insert is committed by the server as it runs; otherwise it belongs to the caller's open
    transaction, and the key stays claimed only if the caller commits. While that transaction
    is open, a concurrent claim of the same key waits for it, then returns False after a
    commit or True after a rollback.

`unique_key_ddl(dialect, table, key) -> str`
    The DDL that adds the missing unique key, quoted for the dialect ("postgresql", "mysql"
    or "sqlite"); the constraint is named <table>_<col>_<col>_key:
      PostgreSQL, MySQL  ALTER TABLE invoices ADD CONSTRAINT invoices_tenant_id_period_key
                         UNIQUE (tenant_id, period)
      SQLite             CREATE UNIQUE INDEX invoices_tenant_id_period_key
                         ON invoices (tenant_id, period)
    It fails while the table still holds duplicates of the key; remove those first.

Table and column names must be plain identifiers (letters, digits, _, optionally
schema.table); anything else raises ValueError. They are quoted by psycopg.sql.Identifier on
raw psycopg connections and by SQLAlchemy's identifier preparer or Core constructs otherwise.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lockconsole.config.loader import check_identifier

if TYPE_CHECKING:
    from sqlalchemy import Insert

MYSQL_DUP_ENTRY = 1062
CLIENT_FOUND_ROWS = 2  # pymysql.constants.CLIENT.FOUND_ROWS


def claim(
    conn: Any, table: str, values: Mapping[str, object], key: Sequence[str] | None = None
) -> bool:
    """Insert `values` into `table` unless a row with the same unique key exists (see module doc).

    True if this call inserted the row, False if the key was already taken. Never commits.
    """
    schema_name, table_name, columns, key_columns = _check(table, values, key)
    params = [values[c] for c in columns]
    kind = _kind(conn)
    if kind == "psycopg":
        return _claim_psycopg(conn, schema_name, table_name, columns, key_columns, params)
    if kind == "pymysql":
        return _claim_pymysql(conn, table, columns, key_columns, params)
    if kind == "sqlite3":
        return _claim_sqlite(conn, table, columns, key_columns, params)
    return _claim_sqlalchemy(conn, schema_name, table_name, values, columns, key_columns)


def unique_key_ddl(dialect: str, table: str, key: Sequence[str]) -> str:
    """The DDL adding a unique key on `key` to `table`, quoted for `dialect` (see module doc)."""
    from sqlalchemy import Column, Index, MetaData, Table, UniqueConstraint
    from sqlalchemy.schema import AddConstraint, CreateIndex

    name = _dialect_name(dialect)
    if isinstance(key, str) or not key:
        raise ValueError("the unique key is a non-empty list of column names")
    schema_name, table_name = _split(check_identifier(table))
    columns = [check_identifier(c) for c in key]
    if any("." in c for c in columns):
        raise ValueError(f"a key column is a plain name, not {columns!r}")
    constraint = f"{table_name}_{'_'.join(columns)}_key"[:63]
    t = Table(table_name, MetaData(), *[Column(c) for c in columns], schema=schema_name)
    if name == "sqlite":
        ddl: Any = CreateIndex(Index(constraint, *[t.c[c] for c in columns], unique=True))
    else:
        ddl = AddConstraint(UniqueConstraint(*[t.c[c] for c in columns], name=constraint))
    return str(ddl.compile(dialect=_sa_dialect(name))).strip()


# -- per driver ---------------------------------------------------------------------------


def _claim_psycopg(
    conn: Any,
    schema_name: str | None,
    table_name: str,
    columns: list[str],
    key: list[str] | None,
    params: list[Any],
) -> bool:
    from psycopg import sql

    target = sql.Identifier(schema_name, table_name) if schema_name else sql.Identifier(table_name)
    query = sql.SQL("INSERT INTO {} ({}) VALUES ({}) ON CONFLICT {}DO NOTHING").format(
        target,
        sql.SQL(", ").join(sql.Identifier(c) for c in columns),
        sql.SQL(", ").join(sql.Placeholder() for _ in columns),
        sql.SQL("({}) ").format(sql.SQL(", ").join(sql.Identifier(c) for c in key))
        if key
        else sql.SQL(""),
    )
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.rowcount == 1


def _claim_pymysql(
    conn: Any, table: str, columns: list[str], key: list[str] | None, params: list[Any]
) -> bool:
    import pymysql

    q = _quoter("mysql")
    head = f"INSERT INTO {q(table)} ({', '.join(q(c) for c in columns)}) "
    head += f"VALUES ({', '.join('%s' for _ in columns)})"
    found_rows = bool(getattr(conn, "client_flag", 0) & CLIENT_FOUND_ROWS)
    with conn.cursor() as cur:
        if not found_rows:
            first = q((key or columns)[0])  # quoted by SQLAlchemy's MySQL identifier preparer
            upsert = " ".join((head, "ON DUPLICATE KEY UPDATE", first, "=", first))
            cur.execute(upsert, params)
            return cur.rowcount == 1
        try:
            cur.execute(head, params)
        except pymysql.err.IntegrityError as exc:
            if exc.args and exc.args[0] == MYSQL_DUP_ENTRY:
                return False
            raise
        return True


def _claim_sqlite(
    conn: sqlite3.Connection, table: str, columns: list[str], key: list[str] | None, params: list
) -> bool:
    q = _quoter("sqlite")
    target = f"({', '.join(q(c) for c in key)}) " if key else ""
    query = (
        f"INSERT INTO {q(table)} ({', '.join(q(c) for c in columns)}) "
        f"VALUES ({', '.join('?' for _ in columns)}) ON CONFLICT {target}DO NOTHING"
    )
    cur = conn.execute(query, params)
    try:
        return cur.rowcount == 1
    finally:
        cur.close()


def _claim_sqlalchemy(
    conn: Any,
    schema_name: str | None,
    table_name: str,
    values: Mapping[str, object],
    columns: list[str],
    key: list[str] | None,
) -> bool:
    from sqlalchemy import column
    from sqlalchemy import table as table_clause
    from sqlalchemy.exc import IntegrityError

    t = table_clause(table_name, *[column(c) for c in columns], schema=schema_name)
    row = {c: values[c] for c in columns}
    name = _dialect_name(conn.dialect.name)
    stmt: Insert
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        stmt = pg_insert(t).values(row).on_conflict_do_nothing(index_elements=key)
    elif name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        stmt = sqlite_insert(t).values(row).on_conflict_do_nothing(index_elements=key)
    else:
        from sqlalchemy.dialects.mysql import insert as mysql_insert

        driver = conn.connection.driver_connection
        found_rows = bool(getattr(driver, "client_flag", CLIENT_FOUND_ROWS) & CLIENT_FOUND_ROWS)
        if found_rows:
            try:
                conn.execute(t.insert().values(row))
            except IntegrityError as exc:
                orig = getattr(exc, "orig", None)
                if orig is not None and orig.args and orig.args[0] == MYSQL_DUP_ENTRY:
                    return False
                raise
            return True
        first = (key or columns)[0]
        stmt = mysql_insert(t).values(row).on_duplicate_key_update({first: t.c[first]})
    # INSERT rowcounts are only kept when asked for (SQLAlchemy >= 2.0.28)
    return conn.execute(stmt, execution_options={"preserve_rowcount": True}).rowcount == 1


# -- helpers ------------------------------------------------------------------------------


def _check(
    table: str, values: Mapping[str, object], key: Sequence[str] | None
) -> tuple[str | None, str, list[str], list[str] | None]:
    schema_name, table_name = _split(check_identifier(table))
    if not values:
        raise ValueError("claim needs at least one column value")
    columns = [check_identifier(c) for c in values]
    key_columns = None
    if key is not None:
        if isinstance(key, str) or not key:
            raise ValueError("the unique key is a non-empty list of column names")
        key_columns = [check_identifier(c) for c in key]
        missing = [c for c in key_columns if c not in values]
        if missing:
            raise ValueError(f"key column(s) {missing} have no value in the row")
    for c in columns + (key_columns or []):
        if "." in c:
            raise ValueError(f"{c!r} is not a plain column name")
    return schema_name, table_name, columns, key_columns


def _split(name: str) -> tuple[str | None, str]:
    schema_name, _, table_name = name.rpartition(".")
    return schema_name or None, table_name


def _kind(conn: Any) -> str:
    """Which driver `conn` belongs to, without importing a driver that is not loaded."""
    if isinstance(conn, sqlite3.Connection):
        return "sqlite3"
    psycopg = sys.modules.get("psycopg")
    if psycopg is not None and isinstance(conn, psycopg.Connection):
        return "psycopg"
    pymysql = sys.modules.get("pymysql")
    if pymysql is not None and isinstance(conn, pymysql.connections.Connection):
        return "pymysql"
    if "sqlalchemy" in sys.modules:
        from sqlalchemy.engine import Connection

        if isinstance(conn, Connection):
            return "sqlalchemy"
    raise TypeError(
        f"claim needs a psycopg, PyMySQL, sqlite3 or SQLAlchemy connection, "
        f"not {type(conn).__module__}.{type(conn).__name__}"
    )


def _dialect_name(dialect: str) -> str:
    name = {"postgres": "postgresql", "mariadb": "mysql"}.get(dialect, dialect)
    if name not in ("postgresql", "mysql", "sqlite"):
        raise ValueError(f"unknown dialect {dialect!r} (expected postgresql, mysql or sqlite)")
    return name


def _sa_dialect(name: str) -> Any:
    if name == "postgresql":
        from sqlalchemy.dialects.postgresql.base import PGDialect

        return PGDialect()
    if name == "mysql":
        from sqlalchemy.dialects.mysql.base import MySQLDialect

        return MySQLDialect()
    from sqlalchemy.dialects.sqlite.base import SQLiteDialect

    return SQLiteDialect()


def _quoter(name: str) -> Any:
    """Quote a checked (schema.)name with SQLAlchemy's identifier preparer for `name`."""
    preparer = _sa_dialect(name).identifier_preparer

    def quote(ident: str) -> str:
        return ".".join(preparer.quote(part) for part in ident.split("."))

    return quote
