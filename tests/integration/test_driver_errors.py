"""backends/errors.classify: one reading of driver errors, from real servers' real errors."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from lockconsole.backends.errors import classify


def _error_of(run: Any) -> BaseException:
    with pytest.raises(Exception) as caught:
        run()
    return caught.value


def test_postgres_errors(pg_conn: Any, uid: str) -> None:
    missing = _error_of(lambda: pg_conn.execute(f"SELECT 1 FROM no_table_{uid}"))
    assert classify(missing, pg_conn) == "missing"
    other = _error_of(lambda: pg_conn.execute("SELECT 1/0"))
    assert classify(other, pg_conn) == "other"
    import psycopg

    with psycopg.connect(pg_conn.info.dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        gone = _error_of(lambda: victim.execute("SELECT 1"))
        assert classify(gone, victim) == "gone"


def test_postgres_missing_privilege_is_denied(pg_conn: Any, uid: str) -> None:
    role = f"lc_denied_{uid}"
    pg_conn.execute(f"CREATE ROLE {role}")
    try:
        pg_conn.execute(f"CREATE TABLE secret_{uid} (x int)")
        pg_conn.execute(f"SET ROLE {role}")
        denied = _error_of(lambda: pg_conn.execute(f"SELECT * FROM secret_{uid}"))
        assert classify(denied, pg_conn) == "denied"
    finally:
        pg_conn.execute("RESET ROLE")
        pg_conn.execute(f"DROP TABLE IF EXISTS secret_{uid}")
        pg_conn.execute(f"DROP ROLE {role}")


def test_mysql_errors(mysql_conn: Any, uid: str) -> None:
    with mysql_conn.cursor() as cur:
        missing = _error_of(lambda: cur.execute(f"SELECT 1 FROM no_table_{uid}"))
        assert classify(missing, mysql_conn) == "missing"
        other = _error_of(lambda: cur.execute("SELECT * FROM"))
        assert classify(other, mysql_conn) == "other"
        cur.execute("SELECT CONNECTION_ID()")
        (pid,) = cur.fetchone()
        killed = _error_of(lambda: cur.execute(f"KILL {pid}"))  # MariaDB: 1927, killed
    assert classify(killed, mysql_conn) == "gone"
    gone = _error_of(lambda: mysql_conn.cursor().execute("SELECT 1"))
    assert classify(gone, mysql_conn) == "gone"


def test_sqlite_errors_and_non_driver_errors(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "x.db")
    assert (
        classify(_error_of(lambda: conn.execute("SELECT * FROM no_such_table")), conn) == "missing"
    )
    assert classify(_error_of(lambda: conn.execute("SELEC")), conn) == "other"
    conn.execute("CREATE TABLE t (x int)")
    conn.commit()
    conn.close()
    readonly = sqlite3.connect(f"file:{tmp_path / 'x.db'}?mode=ro", uri=True)
    assert (
        classify(_error_of(lambda: readonly.execute("INSERT INTO t VALUES (1)")), None) == "denied"
    )
    assert classify(ValueError("not a driver's"), None) is None
