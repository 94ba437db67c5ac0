"""PgInspector against a real PostgreSQL: holders, waiters, privileges, guarded release, audit."""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.postgres.inspect import PgInspector, hidden_message
from lockconsole.config.urls import parse_url
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job, LockKey
from lockconsole.model.views import Holder

from tests.support.helpers import wait_for

ACTOR = Actor("tester", "testhost")
Connect = Callable[..., Any]


def url_as(pg_url: str, user: str) -> str:
    """pg_url with another user name (trust auth on the test servers)."""
    scheme, rest = pg_url.split("://", 1)
    return f"{scheme}://{user}@{rest.rpartition('@')[2]}"


def key_of(uid: str, salt: int = 0) -> int:
    """A unique int64 key for this test."""
    return (int(uid, 16) << 8) + salt


def pair_of(uid: str) -> tuple[int, int]:
    return int(uid[:7], 16), -int(uid[7:], 16) - 1


@pytest.fixture
def db(pg_url: str) -> Database:
    return Database("main", parse_url(pg_url))


@pytest.fixture
def inspector(db: Database) -> Iterator[PgInspector]:
    insp = PgInspector(db)
    yield insp
    insp.close()


@pytest.fixture
def audit(db: Database) -> Iterator[AuditLog]:
    log = AuditLog(db)
    yield log
    log.close()


@pytest.fixture
def connect(pg_url: str) -> Iterator[Connect]:
    """Open plain autocommit psycopg sessions (not lockconsole's); all closed at the end."""
    opened: list[Any] = []

    def open_(url: str | None = None, app: str = "plain-holder") -> Any:
        conn = psycopg.connect(url or pg_url, autocommit=True, application_name=app)
        opened.append(conn)
        return conn

    yield open_
    for conn in opened:
        conn.close()


@pytest.fixture
def roles(pg_conn: Any, uid: str) -> Iterator[Callable[[str], str]]:
    """Create LOGIN roles unique to this test; each is dropped (its sessions ended) at the end."""
    made: list[str] = []

    def make(suffix: str) -> str:
        name = f"lc_{suffix}_{uid}"
        pg_conn.execute(
            psycopg.sql.SQL("CREATE ROLE {} LOGIN").format(psycopg.sql.Identifier(name))
        )
        made.append(name)
        return name

    yield make
    for name in made:
        pg_conn.execute(
            "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE usename = %s",
            (name,),
        )
        pg_conn.execute(psycopg.sql.SQL("DROP ROLE {}").format(psycopg.sql.Identifier(name)))


def find(inspector: PgInspector, key: str, jobs: tuple[Job, ...] = ()) -> list[Holder]:
    return [h for h in inspector.holders(jobs).holders if h.key == key]


def entry_for(audit: AuditLog, key: str) -> list[Any]:
    return [e for e in audit.entries(500) if f"key {key} " in e.target]


def test_int64_holders_negative_and_shared(inspector: PgInspector, connect: Connect, uid: str):
    k = key_of(uid)
    a, b = connect(app="holder-a"), connect(app="holder-b")
    a.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", (k, -k))
    a.execute("SELECT pg_advisory_lock_shared(%s)", (k + 1,))
    b.execute("SELECT pg_advisory_lock_shared(%s)", (k + 1,))
    a_pid = a.info.backend_pid

    (pos,) = find(inspector, str(k))
    (neg,) = find(inspector, str(-k))
    shared = find(inspector, str(k + 1))
    for h in (pos, neg):
        assert (h.key_kind, h.mode, h.granted, h.pid) == ("int64", "ExclusiveLock", True, a_pid)
        assert h.source == "pg_locks" and h.database == "main" and h.kind == "advisory"
        assert h.job is None and h.hidden is None and h.blocked_by == ()
        assert h.user == "postgres" and h.application_name == "holder-a"
        assert h.state == "idle" and h.backend_start is not None and h.state_since is not None
        assert h.query and "pg_advisory_lock_shared" in h.query and len(h.query) <= 200
        assert h.datname == inspector.database.url.database
    assert sorted(h.pid or 0 for h in shared) == sorted([a_pid, b.info.backend_pid])
    assert {h.mode for h in shared} == {"ShareLock"} and all(h.granted for h in shared)


def test_int4_pair_holder(inspector: PgInspector, connect: Connect, uid: str):
    k1, k2 = pair_of(uid)
    connect().execute("SELECT pg_advisory_lock(%s::int4, %s::int4)", (k1, k2))
    (h,) = find(inspector, f"{k1},{k2}")
    assert h.key_kind == "int4pair" and h.granted and h.mode == "ExclusiveLock"


def test_waiter_shows_blocked_by(inspector: PgInspector, connect: Connect, uid: str):
    k = key_of(uid)
    holder, waiter = connect(app="holder"), connect(app="waiter")
    holder.execute("SELECT pg_advisory_lock(%s)", (k,))
    thread = threading.Thread(target=lambda: waiter.execute("SELECT pg_advisory_lock(%s)", (k,)))
    thread.start()
    try:
        rows = wait_for(lambda: [h for h in find(inspector, str(k)) if not h.granted])
        (w,) = rows
        assert w.pid == waiter.info.backend_pid and w.blocked_by == (holder.info.backend_pid,)
        assert w.waiting_since is not None and w.application_name == "waiter"
        (g,) = [h for h in find(inspector, str(k)) if h.granted]
        assert g.pid == holder.info.backend_pid and g.blocked_by == ()
        result = inspector.release(w, actor=ACTOR, audit=None)  # type: ignore[arg-type]  # refused first
        assert result.status == "error" and "only granted holders" in result.message
    finally:
        holder.execute("SELECT pg_advisory_unlock(%s)", (k,))
        thread.join(10)


def test_job_mapping_instance_and_xact_start(
    inspector: PgInspector, connect: Connect, uid: str
) -> None:
    k, pair = key_of(uid), pair_of(uid)
    jobs = (
        Job(f"session_{uid}", "main", "pg-session", LockKey("int64", k)),
        Job(f"xact_{uid}", "main", "pg-xact", LockKey("int4pair", pair)),
        Job(f"elsewhere_{uid}", "other", "pg-session", LockKey("int64", k + 1)),
    )
    a = connect(app=f"lockconsole:session_{uid}@web-1")
    a.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", (k, k + 1))
    b = psycopg.connect(inspector.database.url.raw, application_name=f"lockconsole:xact_{uid}@w2")
    try:
        b.execute("SELECT pg_advisory_xact_lock(%s::int4, %s::int4)", pair)  # open transaction
        found = {h.key: h for h in inspector.holders(jobs).holders}
        assert found[str(k)].job == f"session_{uid}" and found[str(k)].instance == "web-1"
        assert found[str(k)].held_since is None  # session lock: the console fills it
        assert found[str(k + 1)].job is None  # same key, but the job is in another database
        x = found[f"{pair[0]},{pair[1]}"]
        assert x.job == f"xact_{uid}" and x.instance == "w2"
        assert x.state == "idle in transaction" and x.held_since == x.xact_start is not None
    finally:
        b.close()


def test_hidden_details_for_a_plain_role(
    db: Database, connect: Connect, roles: Callable[[str], str], pg_url: str, uid: str
) -> None:
    k = key_of(uid)
    connect().execute("SELECT pg_advisory_lock(%s)", (k,))  # a superuser's session
    viewer = roles("viewer")
    insp = PgInspector(Database("main", parse_url(url_as(pg_url, viewer))))
    try:
        listing = insp.holders(())
        (h,) = [h for h in listing.holders if h.key == str(k)]
        assert h.hidden == hidden_message(viewer) and "pg_read_all_stats" in h.hidden
        assert h.user == "postgres" and h.query is None and h.backend_start is None
        assert any("pg_read_all_stats" in n and viewer in n for n in listing.notes)
    finally:
        insp.close()


def test_release_ends_the_holder(
    inspector: PgInspector, audit: AuditLog, connect: Connect, uid: str
) -> None:
    k = key_of(uid)
    victim = connect()
    victim.execute("SELECT pg_advisory_lock(%s)", (k,))
    (h,) = find(inspector, str(k))
    result = inspector.release(h, actor=ACTOR, audit=audit)
    assert result.status == "released", result.message
    assert f"pid {h.pid}" in result.message
    assert re.search(r" in \d+(ms|\.\ds|s)$", result.message), result.message  # the one format
    assert find(inspector, str(k)) == []
    with pytest.raises(psycopg.OperationalError) as err:
        victim.execute("SELECT 1")
    assert err.value.sqlstate == "57P01"
    (entry,) = entry_for(audit, str(k))
    assert (entry.action, entry.result, entry.os_user) == ("release", "released", "tester")


def test_release_refused_when_holder_changed(
    inspector: PgInspector, audit: AuditLog, connect: Connect, uid: str
) -> None:
    k = key_of(uid)
    a = connect()
    a.execute("SELECT pg_advisory_lock(%s), pg_advisory_lock(%s)", (k, k + 1))
    gone, (moved,) = find(inspector, str(k)), find(inspector, str(k + 1))
    a.execute("SELECT pg_advisory_unlock(%s)", (k,))
    result = inspector.release(gone[0], actor=ACTOR, audit=audit)
    assert result.status == "holder_changed"
    assert f"pid {a.info.backend_pid} no longer holds key {k}" in result.message
    assert "nothing was done" in result.message
    assert moved.backend_start is not None
    stale = dataclasses.replace(moved, backend_start=moved.backend_start - timedelta(seconds=1))
    assert inspector.release(stale, actor=ACTOR, audit=audit).status == "holder_changed"
    assert a.execute("SELECT 1").fetchone() == (1,)  # nothing was terminated
    assert len(find(inspector, str(k + 1))) == 1
    assert [e.result for e in entry_for(audit, str(k))] == ["holder_changed"]
    assert [e.result for e in entry_for(audit, str(k + 1))] == ["holder_changed"]


def test_release_denied_names_pg_signal_backend(
    audit: AuditLog, connect: Connect, roles: Callable[[str], str], pg_url: str, uid: str
) -> None:
    k = key_of(uid)
    holder = connect()
    holder.execute("SELECT pg_advisory_lock(%s)", (k,))
    operator = roles("op")
    insp = PgInspector(Database("main", parse_url(url_as(pg_url, operator))))
    try:
        (h,) = find(insp, str(k))
        result = insp.release(h, actor=ACTOR, audit=audit)
    finally:
        insp.close()
    assert result.status == "denied"
    assert "pg_signal_backend" in result.message and operator in result.message
    assert holder.execute("SELECT 1").fetchone() == (1,)
    assert [e.result for e in entry_for(audit, str(k))] == ["denied"]


def test_release_without_backend_start_says_so(
    pg_conn: Any,
    audit: AuditLog,
    connect: Connect,
    roles: Callable[[str], str],
    pg_url: str,
    uid: str,
) -> None:
    k = key_of(uid)
    owner, operator = roles("owner"), roles("signal")
    pg_conn.execute(
        psycopg.sql.SQL("GRANT pg_signal_backend TO {}").format(psycopg.sql.Identifier(operator))
    )
    victim = connect(url_as(pg_url, owner))
    victim.execute("SELECT pg_advisory_lock(%s)", (k,))
    insp = PgInspector(Database("main", parse_url(url_as(pg_url, operator))))
    try:
        (h,) = find(insp, str(k))
        assert h.backend_start is None and h.hidden
        result = insp.release(h, actor=ACTOR, audit=audit)
        assert result.status == "released", result.message
        assert "backend_start" in result.message and "pg_read_all_stats" in result.message
        assert find(insp, str(k)) == []
    finally:
        insp.close()


def test_failing_audit_means_nothing_is_done(
    db: Database,
    inspector: PgInspector,
    audit: AuditLog,
    connect: Connect,
    roles: Callable[[str], str],
    pg_url: str,
    uid: str,
) -> None:
    k = key_of(uid)
    audit.entries(1)  # the shared audit table exists (owned by postgres)
    nobody = roles("noaudit")  # may not insert into it
    holder = connect()
    holder.execute("SELECT pg_advisory_lock(%s)", (k,))
    (h,) = find(inspector, str(k))
    broken = AuditLog(Database("main", parse_url(url_as(pg_url, nobody))))
    try:
        with pytest.raises(DatabaseError, match="nothing was done"):
            inspector.release(h, actor=ACTOR, audit=broken)
    finally:
        broken.close()
    assert holder.execute("SELECT 1").fetchone() == (1,)
    assert len(find(inspector, str(k))) == 1
    assert entry_for(audit, str(k)) == []
