"""Stopping a ledger write at the server: another session locks the attempt's row (SELECT …
FOR UPDATE), so an UPDATE of that row waits exactly there until the lock is let go, and the
server's own views show it waiting. Each write that waits for the row queues behind the ones
that came first, and goes on in that order.

The views list every session of the database: use a database of the test's own
(`own_database`, `fresh_mysql`), so no other test's session is counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tests.support.helpers import mysql_connect


@contextmanager
def pg_row_locked(ledger_url: str, run_id: int) -> Iterator[None]:
    """Within the block, the run's ledger row is locked by a session of its own (PostgreSQL)."""
    import psycopg

    with psycopg.connect(ledger_url) as blocker:
        blocker.execute("SELECT 1 FROM lockconsole_runs WHERE id = %s FOR UPDATE", (run_id,))
        try:
            yield
        finally:
            blocker.rollback()


def pg_writes_waiting(conn: Any) -> int:
    """How many sessions of `conn`'s database wait for a lock in a statement that updates the
    ledger (a merged statement updates it in a WITH clause)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE '%UPDATE lockconsole_runs%' "
        "AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0])


def my_query(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn.ping()
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


@contextmanager
def my_row_locked(ledger_url: str, run_id: int) -> Iterator[None]:
    """Within the block, the run's ledger row is locked by a session of its own (MariaDB)."""
    blocker = mysql_connect(ledger_url, autocommit=False)
    try:
        my_query(blocker, "SELECT id FROM lockconsole_runs WHERE id = %s FOR UPDATE", run_id)
        yield
    finally:
        blocker.rollback()
        blocker.close()


# InnoDB refreshes innodb_trx only when it was not read for 0.1 s: poll it less often than that
MY_POLL = 0.2


def my_writes_waiting(conn: Any) -> int:
    """How many sessions of `conn`'s database wait for a row lock in an UPDATE of the ledger."""
    rows = my_query(
        conn,
        "SELECT id FROM information_schema.processlist WHERE db = DATABASE() "
        "AND info LIKE '%%UPDATE lockconsole_runs%%' AND id <> CONNECTION_ID() "
        "AND id IN (SELECT trx_mysql_thread_id FROM information_schema.innodb_trx "
        "WHERE trx_state = 'LOCK WAIT')",
    )
    return len(rows)
