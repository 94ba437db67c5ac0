"""A run ledger of its own, filled in bulk (INSERT ... SELECT over generate_series, MariaDB's
seq_0_to_N, SQLite's recursive CTE), for the prune tests and their plain SQL counts.

Rows: 10 jobs firing every minute on three instances, one succeeded and two skipped per slot,
`count` attempts from `base` on (the server's time minus some days)."""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

from tests.support.helpers import mysql_connect

PG_FILL = """
INSERT INTO lockconsole_runs
    (job, slot, instance, host, pid, "trigger", outcome, started_at, finished_at)
SELECT 'j' || ((g / 3) %% 10), s.slot, 'web-' || (g %% 3), 'h', 1, 'scheduled',
       CASE WHEN g %% 3 = 0 THEN 'succeeded' ELSE 'skipped' END,
       s.slot + (g %% 3) * interval '300 milliseconds',
       s.slot + (g %% 3) * interval '300 milliseconds'
              + CASE WHEN g %% 3 = 0 THEN interval '5 seconds' ELSE interval '0' END
FROM generate_series(0, %(n)s - 1) g,
     LATERAL (SELECT %(base)s::timestamptz + (g / 30) * interval '1 minute' AS slot) s
"""
MYSQL_FILL = """
INSERT INTO lockconsole_runs
    (job, slot, instance, host, pid, `trigger`, outcome, started_at, finished_at)
SELECT CONCAT('j', (seq DIV 3) MOD 10), %(base)s + INTERVAL (seq DIV 30) MINUTE,
       CONCAT('web-', seq MOD 3), 'h', 1, 'scheduled',
       IF(seq MOD 3 = 0, 'succeeded', 'skipped'),
       %(base)s + INTERVAL (seq DIV 30) MINUTE + INTERVAL ((seq MOD 3) * 300000) MICROSECOND,
       %(base)s + INTERVAL (seq DIV 30) MINUTE + INTERVAL ((seq MOD 3) * 300000) MICROSECOND
              + INTERVAL IF(seq MOD 3 = 0, 5, 0) SECOND
FROM seq_0_to_{last}
"""
SQLITE_FILL = """
WITH RECURSIVE g(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM g WHERE n + 1 < :n)
INSERT INTO lockconsole_runs
    (job, slot, instance, host, pid, "trigger", outcome, started_at, finished_at)
SELECT 'j' || ((n / 3) % 10),
       strftime('%Y-%m-%d %H:%M:%f', :base, '+' || (n / 30) || ' minutes') || '000',
       'web-' || (n % 3), 'h', 1, 'scheduled',
       CASE WHEN n % 3 = 0 THEN 'succeeded' ELSE 'skipped' END,
       strftime('%Y-%m-%d %H:%M:%f', :base, '+' || (n / 30) || ' minutes',
                '+' || ((n % 3) * 0.3) || ' seconds') || '000',
       strftime('%Y-%m-%d %H:%M:%f', :base, '+' || (n / 30) || ' minutes',
                '+' || ((n % 3) * 0.3 + CASE WHEN n % 3 = 0 THEN 5 ELSE 0 END) || ' seconds')
           || '000'
FROM g
"""


class Plain:
    """A plain driver connection to a ledger database, for filling it and counting its rows."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = url.split(":", 1)[0]
        if self.dialect == "postgresql":
            import psycopg

            self.conn: Any = psycopg.connect(url, autocommit=True)
        elif self.dialect == "mysql":
            self.conn = mysql_connect(url)
        else:
            self.conn = sqlite3.connect(url.removeprefix("sqlite:///"), isolation_level=None)

    def rows(self, sql: str, params: Any = None) -> list[Any]:
        if self.dialect == "sqlite":
            return list(self.conn.execute(sql, params or ()).fetchall())
        cur = self.conn.cursor()
        try:
            cur.execute(sql, params)
            return list(cur.fetchall()) if cur.description else []
        finally:
            cur.close()

    def value(self, sql: str, params: Any = None) -> Any:
        return self.rows(sql, params)[0][0]

    def count(self, table: str, where: str = "1 = 1", params: Any = None) -> int:
        return int(self.value(f"SELECT count(*) FROM {table} WHERE {where}", params))

    def param(self) -> str:
        return "?" if self.dialect == "sqlite" else "%s"

    def stamp(self, moment: datetime) -> Any:
        """`moment` in the form the ledger stores for this dialect."""
        from lockconsole.backends.ledger.timestamps import to_db

        return to_db(moment, self.dialect)

    def now(self) -> datetime:
        if self.dialect == "postgresql":
            found = self.value("SELECT now()")
        elif self.dialect == "mysql":
            found = self.value("SELECT UTC_TIMESTAMP(6)")
        else:
            return datetime.now(UTC)
        return found.replace(tzinfo=UTC) if found.tzinfo is None else found.astimezone(UTC)

    def fill(self, count: int, base: datetime) -> None:
        """`count` attempts from the minute `base` on (see the module's docstring)."""
        base = base.replace(second=0, microsecond=0)
        if self.dialect == "postgresql":
            self.rows(PG_FILL, {"n": count, "base": base})
        elif self.dialect == "mysql":
            self.rows(MYSQL_FILL.format(last=count - 1), {"base": self.stamp(base)})
        else:
            self.rows(SQLITE_FILL, {"n": count, "base": base.strftime("%Y-%m-%d %H:%M:%S")})

    def close(self) -> None:
        self.conn.close()


@contextmanager
def own_mysql_database(mysql_url: str) -> Iterator[str]:
    """A MariaDB/MySQL database of the test's own (dropped afterwards), as a URL."""
    name = f"prune_{uuid.uuid4().hex[:8]}"
    admin = mysql_connect(mysql_url)
    try:
        with admin.cursor() as cur:
            cur.execute(f"CREATE DATABASE {name}")
        yield mysql_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {name}")
        admin.close()


def ago(plain: Plain, days: float) -> datetime:
    """The server's now minus `days`."""
    return plain.now() - timedelta(days=days)
