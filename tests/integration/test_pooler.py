"""Pooler detection and orphaned session locks, with a real PgBouncer in transaction pooling."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.postgres.inspect import PgInspector
from lockconsole.backends.postgres.pooler import (
    PoolerInfo,
    _probe_admin,
    detect_pooler,
    orphaned_server_pids,
    pooler_warnings,
)
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database, Job, LockKey

from tests.support.helpers import DEADLINE

ACTOR = Actor("tester", "testhost")


def jobs_for(uid: str) -> tuple[Job, ...]:
    return (
        Job(f"sess_{uid}", "main", "pg-session", LockKey("int64", 1)),
        Job(f"xact_{uid}", "main", "pg-xact", LockKey("int64", 2)),
        Job(f"other_{uid}", "other", "pg-session", LockKey("int64", 3)),
    )


@pytest.fixture
def pooled_db(pgbouncer: str) -> Database:
    return Database("main", parse_url(pgbouncer))


def test_direct_url_is_not_a_pooler(pg_url: str) -> None:
    info = detect_pooler(parse_url(pg_url))
    assert not info.detected and info.kind is None and info.pool_mode is None
    assert info.evidence.startswith("direct connection")


def test_pgbouncer_is_detected_with_its_pool_mode(pgbouncer: str) -> None:
    info = detect_pooler(parse_url(pgbouncer))
    assert (info.detected, info.kind, info.pool_mode) == (True, "pgbouncer", "transaction")
    assert "inet_server_port()" in info.evidence and "PgBouncer 1." in info.evidence


def test_admin_console_refusal_is_itself_pgbouncer(pgbouncer: str) -> None:
    plain = pgbouncer.replace("postgres@", "lockconsole_pgb_plain@")
    kind, mode, evidence = _probe_admin(parse_url(plain))
    assert (kind, mode) == ("pgbouncer", None) and "not allowed" in evidence


def test_pooler_warnings_for_pg_session_jobs(pooled_db: Database, uid: str) -> None:
    info = detect_pooler(pooled_db.url)
    (warning,) = pooler_warnings(jobs_for(uid), pooled_db, info)
    assert f"sess_{uid}" in warning and '"pg-xact"' in warning and "transaction" in warning
    assert "postgresql://postgres@127.0.0.1" in warning
    session_mode = PoolerInfo(True, "pgbouncer", "session", "test")
    assert pooler_warnings(jobs_for(uid), pooled_db, session_mode) == []
    unknown = PoolerInfo(True, "proxy", None, "test")
    assert "unknown pool mode" in pooler_warnings(jobs_for(uid), pooled_db, unknown)[0]
    assert pooler_warnings(jobs_for(uid), pooled_db, PoolerInfo(False, None, None, "")) == []


def test_orphaned_server_pids_is_none_without_admin_console(pg_url: str) -> None:
    assert orphaned_server_pids(parse_url(pg_url)) is None


@pytest.fixture
def direct_inspector(pg_url: str) -> Iterator[PgInspector]:
    insp = PgInspector(Database("main", parse_url(pg_url)))
    yield insp
    insp.close()


def test_orphaned_session_lock_is_found_and_released(
    pgbouncer: str,
    pg_url: str,
    direct_inspector: PgInspector,
    uid: str,
) -> None:
    key = int(uid, 16)
    client: Any = psycopg.connect(pgbouncer, autocommit=True, prepare_threshold=None)
    row = client.execute("SELECT pg_try_advisory_lock(%s), pg_backend_pid()", (key,)).fetchone()
    client.close()  # the client is gone; the lock stays on the pooled server connection
    got, server_pid = row
    assert got

    orphans = orphaned_server_pids(parse_url(pgbouncer))
    assert orphans is not None and server_pid in orphans

    pooled = PgInspector(Database("main", parse_url(pgbouncer)))
    try:  # one statement, so listing through the pooler works too
        (seen,) = [h for h in pooled.holders(()).holders if h.key == str(key)]
    finally:
        pooled.close()
    (h,) = [h for h in direct_inspector.holders(()).holders if h.key == str(key)]
    assert h.pid == seen.pid == server_pid and h.granted

    audit = AuditLog(Database("main", parse_url(pg_url)))
    try:
        result = direct_inspector.release(h, actor=ACTOR, audit=audit)
    finally:
        audit.close()
    assert result.status == "released", result.message
    assert [x for x in direct_inspector.holders(()).holders if x.key == str(key)] == []
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:  # PgBouncer notices the dead server connection
        if server_pid not in (orphaned_server_pids(parse_url(pgbouncer)) or set()):
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"PgBouncer still lists server pid {server_pid}")
    with psycopg.connect(pgbouncer, autocommit=True, prepare_threshold=None) as again:
        assert again.execute("SELECT 1").fetchone() == (1,)  # the pooler kept serving


def test_release_through_the_pooler(
    pgbouncer: str,
    pg_url: str,
    direct_inspector: PgInspector,
    uid: str,
) -> None:
    """The guarded statement may run on the orphan's own server connection (LIFO reuse)."""
    key = int(uid, 16) + 1
    client: Any = psycopg.connect(pgbouncer, autocommit=True, prepare_threshold=None)
    client.execute("SELECT pg_try_advisory_lock(%s)", (key,))
    client.close()
    pooled = PgInspector(Database("main", parse_url(pgbouncer)))
    audit = AuditLog(Database("main", parse_url(pg_url)))
    try:
        (h,) = [h for h in pooled.holders(()).holders if h.key == str(key)]
        result = pooled.release(h, actor=ACTOR, audit=audit)
        assert result.status == "released", result.message
        assert [x for x in direct_inspector.holders(()).holders if x.key == str(key)] == []
        assert [e.result for e in audit.entries(500) if f"key {key} " in e.target] == ["released"]
    finally:
        pooled.close()
        audit.close()
