"""The ShedLock lease table (plus our nullable fencing_token), its clock, and column detection.

Time is what ShedLock's `usingDbTime()` uses: UTC wall-clock in a zone-less TIMESTAMP, read
from the database server (`timezone('utc', CURRENT_TIMESTAMP)` on PostgreSQL,
`UTC_TIMESTAMP(3)` on MySQL/MariaDB). SQLite has no server clock: it gets the Python UTC
clock, bound as a parameter when the expression is built. The MySQL session time zone is left
alone on purpose: ShedLock reads and writes these TIMESTAMPs in the server's default zone.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    TIMESTAMP,
    BigInteger,
    Column,
    DateTime,
    MetaData,
    Select,
    String,
    Table,
    func,
    literal,
    literal_column,
    select,
    table,
    text,
)
from sqlalchemy.dialects import mysql
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import Interval

SHEDLOCK_COLUMNS = ("name", "lock_until", "locked_at", "locked_by")
FENCING = "fencing_token"


def split_name(qualified: str) -> tuple[str | None, str]:
    """('schema', 'table') from 'schema.table'; (None, 'table') without a schema."""
    schema, _, name = qualified.rpartition(".")
    return (schema or None), name


def lease_table(
    qualified: str, dialect: str, *, fencing: bool = True, metadata: MetaData | None = None
) -> Table:
    """ShedLock's table (name, lock_until, locked_at, locked_by) as a Core Table.

    With a `fencing_token` column unless fencing=False.
    """
    schema, name = split_name(qualified)
    stamp: Any = DateTime()
    locked_at_default = None
    if dialect == "postgresql":
        stamp = TIMESTAMP(timezone=False)
    elif dialect == "mysql":
        stamp = mysql.TIMESTAMP(fsp=3)
        locked_at_default = text("CURRENT_TIMESTAMP(3)")
    columns = [
        Column("name", String(64), primary_key=True, autoincrement=False),
        Column("lock_until", stamp, nullable=False),
        Column("locked_at", stamp, nullable=False, server_default=locked_at_default),
        Column("locked_by", String(255), nullable=False),
    ]
    if fencing:
        columns.append(Column(FENCING, BigInteger, nullable=True))
    return Table(name, metadata or MetaData(), *columns, schema=schema)


def db_now(dialect: str) -> ColumnElement[datetime]:
    """The current UTC time as the lease table stores it (SQLite: the Python clock, bound now)."""
    if dialect == "postgresql":
        return func.timezone(
            literal_column("'utc'"), func.current_timestamp(), type_=TIMESTAMP(timezone=False)
        )
    if dialect == "mysql":
        return func.utc_timestamp(literal_column("3"), type_=mysql.TIMESTAMP(fsp=3))
    return literal(datetime.now(UTC).replace(tzinfo=None), DateTime())


def plus(expr: ColumnElement[datetime], delta: timedelta, dialect: str) -> ColumnElement[datetime]:
    """`expr + delta` in the dialect's form (SQLite: only for db_now(), computed in Python)."""
    if dialect == "postgresql":
        return expr + literal(delta, Interval())
    if dialect == "mysql":
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return func.timestampadd(
            literal_column("MICROSECOND"), literal(micros, BigInteger()), expr, type_=DateTime()
        )
    value = getattr(expr, "value", None)
    if not isinstance(value, datetime):
        raise ValueError("on SQLite only the Python clock can be shifted")
    return literal(value + delta, DateTime())


def table_columns(conn: Any, qualified: str) -> set[str] | None:
    """The table's column names (lower-case) from one `SELECT * … LIMIT 0`; None when missing."""
    schema, name = split_name(qualified)
    probe: Select[Any] = (
        select(literal_column("*")).select_from(table(name, schema=schema)).limit(0)
    )
    try:
        with conn.begin():
            keys = conn.execute(probe).keys()
    except DBAPIError:
        return None
    return {k.lower() for k in keys}


def ensure_lease_table(conn: Any, qualified: str, dialect: str) -> bool:
    """Create the table (with fencing_token) when missing; True when it has fencing_token."""
    columns = table_columns(conn, qualified)
    if columns is None:
        try:
            with conn.begin():
                lease_table(qualified, dialect).create(conn, checkfirst=True)
        except DBAPIError:
            columns = table_columns(conn, qualified)  # another instance created it meanwhile
            if columns is None:
                raise
        else:
            columns = table_columns(conn, qualified)
    missing = [c for c in SHEDLOCK_COLUMNS if c not in (columns or ())]
    if missing:
        raise ValueError(f"lease table {qualified} lacks ShedLock column(s) {', '.join(missing)}")
    return FENCING in (columns or ())
