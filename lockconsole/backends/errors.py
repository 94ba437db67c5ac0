"""What a database driver's error means, for psycopg, PyMySQL and sqlite3 alike.

"missing" (the table, or a column an older ledger lacks, does not exist), "denied" (a
privilege is missing: a retry cannot cure it), "gone" (the connection is lost: a new
connection may succeed), "other" (any other driver error), or None when `exc` is not a
driver error. The drivers are imported only when the error came from them.
"""

from __future__ import annotations

from typing import Any, Literal

ErrorKind = Literal["missing", "denied", "gone", "other"]

# PyMySQL errors that mean the connection is gone: server gone away, lost connection, out of
# sync, lost during read, MariaDB "connection was killed", MySQL 8 inactivity disconnect.
MYSQL_GONE = frozenset({2006, 2013, 2014, 2055, 1927, 4031})
# MySQL/MariaDB errors that a retry cannot cure: a privilege is missing (table, column,
# database, access, or a SUPER-like privilege).
MYSQL_DENIED = frozenset({1142, 1143, 1044, 1045, 1227, 1370})
MYSQL_NO_TABLE = 1146
MYSQL_NO_COLUMN = 1054
PG_DENIED = "42501"  # SQLSTATE insufficient_privilege


def classify(exc: BaseException, conn: Any = None) -> ErrorKind | None:
    """The kind of a driver error; `conn` (the connection it came from) tells "gone" apart."""
    module = type(exc).__module__
    if module.startswith("psycopg"):
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        if isinstance(exc, (psycopg.errors.UndefinedTable, psycopg.errors.UndefinedColumn)):
            return "missing"
        if exc.sqlstate == PG_DENIED:
            return "denied"
        broken = conn is not None and (conn.closed or conn.broken)
        if isinstance(exc, psycopg.OperationalError) and broken:
            return "gone"
        return "other"
    if module.startswith("pymysql"):
        import pymysql

        if not isinstance(exc, pymysql.MySQLError):
            return None
        code = exc.args[0] if exc.args else None
        if code in (MYSQL_NO_TABLE, MYSQL_NO_COLUMN):
            return "missing"
        if code in MYSQL_DENIED:
            return "denied"
        if isinstance(exc, pymysql.err.InterfaceError) or code in MYSQL_GONE:
            return "gone"
        if isinstance(exc, pymysql.err.OperationalError) and conn is not None and not conn.open:
            return "gone"
        return "other"
    if not module.startswith("sqlite3"):
        return None
    import sqlite3

    if not isinstance(exc, sqlite3.Error):
        return None
    if any(text in str(exc) for text in ("no such table", "no such column", "has no column")):
        return "missing"
    return "denied" if "readonly" in str(exc) else "other"
