"""Server-side prepared statements: on for a kept direct connection, never through a proxy.

A kept lock or ledger connection repeats the same few statements; its Wire
(backends/postgres/wire.py) prepares each once, which saves the server a parse and plan per
call. A pooler in transaction mode breaks named prepared statements, so a connection whose ports
(inet_server_port, inet_client_port) show anything in between, or a Unix socket, must stay
unprepared. psycopg itself prepares nothing on them: its DEALLOCATE ALL after a rollback would
drop the Wire's statements too.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest

from lockconsole import run_once
from lockconsole.backends.connect import PREPARE_THRESHOLD
from lockconsole.backends.postgres.wire import wire_for
from lockconsole.config.loader import parse_config
from lockconsole.engine.sessions import REGISTRY

from tests.support.helpers import unavailable
from tests.support.tcp_proxy import SwitchableProxy

CYCLES = PREPARE_THRESHOLD + 5


pytestmark = pytest.mark.usefixtures("empty_registry")


def _config(url: str, job: str, strategy: str, extra: str = ""):
    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        f'schedule = "0 2 * * *"\nonce_per_slot = false\nlease_table = "lease_{job}"\n{extra}'
    )


def _cycles(config, job: str) -> None:
    for _ in range(CYCLES):
        with run_once(job, config=config, instance="web-1") as run:
            assert run.acquired, run.run.message


def _kept_connections() -> tuple[Any, Any]:
    """The psycopg connections of the one idle session: (lock's, ledger's or None if unopened)."""
    (sessions,) = REGISTRY._idle.values()
    (session,) = sessions
    lock: Any = session.lock  # a lease keeps its SQLAlchemy connection private
    lock_conn = getattr(lock, "conn", None)
    if lock_conn is None:  # a lease: SQLAlchemy around the psycopg connection
        lock_conn = lock._conn.connection.dbapi_connection
    return lock_conn, session.ledger._conn


def _prepared(conn) -> list[str]:
    rows = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
    return [r[0] for r in rows]


def test_a_pg_xact_skip_keeps_the_prepared_statements(pg_url, uid):
    """A refused pg-xact try rolls its transaction back; the statements the Wire prepared on the
    connection survive it (psycopg, which would follow a rollback with DEALLOCATE ALL, prepares
    nothing there), and the next attempts run on them."""
    import psycopg

    _tcp(pg_url)
    job = f"xskip_{uid}"
    config = _config(pg_url, job, "pg-xact")
    _cycles(config, job)
    lock_conn, _ = _kept_connections()
    for _ in range(PREPARE_THRESHOLD + 1):  # what the watchdog repeats, through psycopg
        lock_conn.execute("SELECT pg_backend_pid()").fetchone()
    names = set(wire_for(lock_conn)._prepared.values())
    assert names
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (config.job(job).key.int64(),))
        with run_once(job, config=config, instance="web-1") as run:
            assert not run.acquired and run.run.outcome == "skipped"
    lock_conn, _ = _kept_connections()
    kept = {r[0].encode() for r in lock_conn.execute("SELECT name FROM pg_prepared_statements")}
    assert names <= kept
    _cycles(config, job)  # every attempt acquires on the kept statements


def _tcp(pg_url: str) -> tuple[str, int]:
    parts = urlsplit(pg_url)
    if not parts.hostname:  # the embedded server of a bare machine: a Unix socket only
        unavailable("needs PostgreSQL on TCP (set LOCKCONSOLE_TEST_PG_URL)")
    return parts.hostname, parts.port or 5432


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact", "lease"])
def test_a_kept_direct_connection_prepares_what_it_repeats(pg_url, uid, strategy):
    _tcp(pg_url)
    job = f"prep_{uid}"
    config = _config(pg_url, job, strategy)
    _cycles(config, job)
    lock_conn, ledger_conn = _kept_connections()
    assert wire_for(lock_conn).direct and lock_conn.prepare_threshold is None
    lock_statements = " ".join(_prepared(lock_conn))
    expected = {
        "pg-session": "pg_try_advisory_lock",
        "pg-xact": "pg_try_advisory_xact_lock",
        "lease": "lock_until",
    }[strategy]
    assert expected in lock_statements
    if strategy in ("pg-session", "lease"):  # decide_run and the finish ride the lock's connection
        assert ledger_conn is None
        assert "INSERT INTO lockconsole_runs" in lock_statements
        assert "UPDATE lockconsole_runs" in lock_statements
        return
    assert wire_for(ledger_conn).direct and ledger_conn.prepare_threshold is None
    assert "INSERT INTO lockconsole_runs" in " ".join(_prepared(ledger_conn))


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact", "lease"])
def test_a_connection_through_a_proxy_never_prepares(pg_url, uid, strategy):
    host, port = _tcp(pg_url)
    proxy = SwitchableProxy((host, port))
    try:
        parts = urlsplit(pg_url)
        proxied = pg_url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{proxy.port}")
        job = f"proxied_{uid}"
        config = _config(proxied, job, strategy, "allow_pooler = true\n")
        _cycles(config, job)
        lock_conn, ledger_conn = _kept_connections()
        assert not wire_for(lock_conn).direct and lock_conn.prepare_threshold is None
        assert _prepared(lock_conn) == []
        if ledger_conn is not None:  # pg-session writes the ledger on the lock's connection
            assert not wire_for(ledger_conn).direct and ledger_conn.prepare_threshold is None
            assert _prepared(ledger_conn) == []
    finally:
        REGISTRY.close_all()
        proxy.close()
