"""MysqlInspector on a real MariaDB/MySQL: holders, waiters and guarded KILL (no mocks)."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.mysql.inspect import SOURCE_NAMES, MysqlInspector
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database, Job, LockKey
from lockconsole.model.views import Holder

from tests.support.helpers import eventually, mysql_connect, unavailable

SOURCES = ["metadata_lock_info", "is_used_lock"]
ACTOR = Actor("tester", "testhost")


connect = mysql_connect


def scalar(conn: Any, sql: str, *args: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


@pytest.fixture(scope="module")
def mariadb_plugin(mysql_url: str) -> bool:
    """MariaDB's metadata_lock_info plugin, installed (global, harmless; left installed)."""
    conn = connect(mysql_url)
    try:
        if "mariadb" not in scalar(conn, "SELECT VERSION()").lower():
            return False
        try:
            scalar(conn, "SELECT COUNT(*) FROM information_schema.METADATA_LOCK_INFO")
        except pymysql.MySQLError:
            with conn.cursor() as cur:
                cur.execute("INSTALL SONAME 'metadata_lock_info'")  # idempotent on MariaDB
    finally:
        conn.close()
    return True


@pytest.fixture
def mli(mariadb_plugin: bool) -> None:
    """Skip a test that needs METADATA_LOCK_INFO on a server that is not MariaDB."""
    if not mariadb_plugin:
        pytest.skip("METADATA_LOCK_INFO is a MariaDB plugin")


@pytest.fixture(params=SOURCES)
def source(request: pytest.FixtureRequest, mariadb_plugin: bool) -> str:
    """Each fallback source in turn (METADATA_LOCK_INFO only on MariaDB)."""
    if request.param == "metadata_lock_info" and not mariadb_plugin:
        pytest.skip("METADATA_LOCK_INFO is a MariaDB plugin")
    return str(request.param)


@pytest.fixture
def db(mysql_url: str) -> Database:
    return Database("main", parse_url(mysql_url))


@pytest.fixture
def session(mysql_url: str) -> Iterator[Callable[..., Any]]:
    """Open PyMySQL sessions (root by default), all closed at the end of the test."""
    opened: list[Any] = []

    def open_session(url: str | None = None) -> Any:
        conn = connect(url or mysql_url)
        opened.append(conn)
        return conn

    yield open_session
    for conn in opened:
        try:
            conn.close()
        except Exception:
            pass


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    """Close inspectors and audit logs at the end of the test."""
    things: list[Any] = []
    yield lambda thing: things.append(thing) or thing
    for thing in reversed(things):
        thing.close()


@pytest.fixture
def make_user(mysql_url: str, uid: str) -> Iterator[Callable[[str, str], str]]:
    """Create account lc_<uid><suffix> with `grants` on the test database; its URL."""
    root = connect(mysql_url)
    made: list[str] = []
    u = parse_url(mysql_url)

    def make(suffix: str, grants: str) -> str:
        user = f"lc_{uid}{suffix}"
        with root.cursor() as cur:
            cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw{uid}'")
            made.append(user)
            cur.execute(f"GRANT {grants} ON `{u.database}`.* TO '{user}'@'%'")
        return f"mysql://{user}:pw{uid}@{u.host}:{u.port or 3306}/{u.database}"

    yield make
    with root.cursor() as cur:
        for user in made:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
    root.close()


def job(uid: str, name: str) -> Job:
    return Job(f"job_{uid}", "main", "mysql", LockKey("name", name))


def hold(conn: Any, name: str) -> int:
    assert scalar(conn, "SELECT GET_LOCK(%s, 0)", name) == 1
    return conn.thread_id()


def mdl_instrument(conn: Any) -> tuple[bool, bool]:
    """(performance_schema is on, its metadata-lock instrument is on) on this server."""
    if scalar(conn, "SELECT @@performance_schema") != 1:
        return False, False
    enabled = scalar(
        conn,
        "SELECT enabled FROM performance_schema.setup_instruments "
        "WHERE name = 'wait/lock/metadata/sql/mdl'",
    )
    return True, str(enabled).upper() == "YES"


def rows_for(inspector: MysqlInspector, jobs: list[Job], name: str) -> list[Holder]:
    return [h for h in inspector.holders(jobs).holders if h.key == name]


def test_detects_the_best_readable_source(mli: None, db: Database, session, closing) -> None:
    ps_on, mdl_on = mdl_instrument(session())
    inspector = closing(MysqlInspector(db))
    listing = inspector.holders([])
    if ps_on and mdl_on:
        assert listing.source == "performance_schema.metadata_locks"
    else:  # the note says what to change in the server's config
        assert listing.source == "information_schema.METADATA_LOCK_INFO"
        want = "performance_schema=ON" if not ps_on else "the MDL instrument is off"
        assert any(want in note for note in listing.notes), listing.notes
    assert inspector.source == listing.source


def test_pymysql_holder_listed(db: Database, session, closing, uid, source) -> None:
    name = f"lc:{uid}"
    pid = hold(session(), name)
    other = hold(session(), f"lc:{uid}:unconfigured")
    inspector = closing(MysqlInspector(db, source=source))
    listing = inspector.holders([job(uid, name)])
    assert listing.source == SOURCE_NAMES[source]
    [holder] = [h for h in listing.holders if h.key == name]
    assert (holder.pid, holder.job, holder.granted) == (pid, f"job_{uid}", True)
    assert holder.kind == "user_lock" and holder.key_kind == "name"
    assert holder.user == "root" and holder.client_addr and holder.hidden is None
    assert holder.state and holder.state.startswith("Sleep") and holder.state_since is not None
    unconfigured = [h for h in listing.holders if h.pid == other]
    if source == "metadata_lock_info":  # every name, mapped to no job
        assert [(h.key, h.job) for h in unconfigured] == [(f"lc:{uid}:unconfigured", None)]
        assert holder.held_since is not None and holder.mode
    else:  # only configured names are asked about
        assert unconfigured == []


def test_mariadb_cli_holder_listed(db: Database, closing, uid, source) -> None:
    client = shutil.which("mariadb") or shutil.which("mysql")
    if client is None:
        unavailable("no mariadb command-line client")
    u, name = db.url, f"lc:{uid}:cli"
    env = dict(os.environ, MYSQL_PWD=u.password or "")
    sql = f"select connection_id(), get_lock('{name}', 0); select sleep(30)"
    proc = subprocess.Popen(
        [
            client,
            "-h",
            u.host or "127.0.0.1",
            "-P",
            str(u.port or 3306),
            "-u",
            u.user or "root",
            "-N",
            "-B",
            "--unbuffered",
            u.database or "test",
            "-e",
            sql,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        cli_id, got = proc.stdout.readline().split()
        assert got == "1"
        inspector = closing(MysqlInspector(db, source=source))
        holders = eventually(lambda: rows_for(inspector, [job(uid, name)], name))
        [holder] = holders
        assert holder.pid == int(cli_id) and holder.job == f"job_{uid}"
        assert holder.query and "sleep(30)" in holder.query
        audit = closing(AuditLog(db))
        result = inspector.release(holder, actor=ACTOR, audit=audit)
        assert result.status == "released", result.message
        assert proc.wait(timeout=10) != 0  # the client lost its connection
    finally:
        proc.kill()
        proc.wait()


def test_waiter_listed_with_its_blocker(mli: None, db: Database, session, closing, uid) -> None:
    name = f"lc:{uid}:it's"  # a quote in the name: the waiter's name is parsed from its query
    holder_conn, waiter_conn = session(), session()
    pid = hold(holder_conn, name)
    waited: list[Any] = []
    waiter = threading.Thread(
        target=lambda: waited.append(scalar(waiter_conn, "SELECT GET_LOCK(%s, 10)", name))
    )
    waiter.start()
    try:
        inspector = closing(MysqlInspector(db, source="metadata_lock_info"))
        rows = eventually(
            lambda: [h for h in rows_for(inspector, [job(uid, name)], name) if not h.granted]
        )
        assert rows, "the waiter never showed"
        [w] = rows
        assert (w.pid, w.blocked_by, w.job) == (waiter_conn.thread_id(), (pid,), f"job_{uid}")
        assert w.waiting_since is not None and "GET_LOCK" in (w.query or "").upper()
        used = closing(MysqlInspector(db, source="is_used_lock"))  # cannot see waiters
        assert [h.pid for h in rows_for(used, [job(uid, name)], name)] == [pid]
    finally:
        scalar(holder_conn, "SELECT RELEASE_LOCK(%s)", name)
        waiter.join(15)
    assert waited == [1]


def test_performance_schema_query_runs(db: Database, session, closing, uid) -> None:
    conn = session()
    name = f"lc:{uid}:ps"
    pid = hold(conn, name)
    ps_on, mdl_on = mdl_instrument(conn)
    listing = closing(MysqlInspector(db, source="performance_schema")).holders([job(uid, name)])
    assert listing.source == "performance_schema.metadata_locks"
    mine = [h.pid for h in listing.holders if h.key == name]
    # performance_schema OFF, or its MDL instrument off: the table stays empty
    assert mine == ([pid] if ps_on and mdl_on else [])


def test_release_kills_holder_and_audits(db, session, closing, uid, source) -> None:
    conn, name = session(), f"lc:{uid}:rel"
    pid = hold(conn, name)
    inspector = closing(MysqlInspector(db, source=source))
    [holder] = rows_for(inspector, [job(uid, name)], name)
    audit = closing(AuditLog(db))
    result = inspector.release(holder, actor=ACTOR, audit=audit)
    assert (result.status, result.target) == ("released", holder), result.message
    assert scalar(session(), "SELECT IS_FREE_LOCK(%s)", name) == 1
    with pytest.raises(pymysql.MySQLError):
        scalar(conn, "SELECT 1")
    [entry] = [e for e in audit.entries(200) if name in e.target]
    assert (entry.result, entry.action, entry.os_user) == ("released", "release", "tester")
    assert str(pid) in entry.target


def test_release_refused_when_holder_changed(mli: None, db, session, closing, uid) -> None:
    first, second, name = session(), session(), f"lc:{uid}:chg"
    old = hold(first, name)
    inspector = closing(MysqlInspector(db, source="metadata_lock_info"))
    [holder] = rows_for(inspector, [job(uid, name)], name)
    assert holder.pid == old
    scalar(first, "SELECT RELEASE_LOCK(%s)", name)
    new = hold(second, name)  # another session holds the name now
    audit = closing(AuditLog(db))
    result = inspector.release(holder, actor=ACTOR, audit=audit)
    assert result.status == "holder_changed"
    assert result.message == (
        f"holder changed: connection {old} no longer holds {name!r}; nothing was done"
    )
    assert scalar(first, "SELECT 1") == 1 and scalar(second, "SELECT IS_USED_LOCK(%s)", name) == new
    scalar(second, "SELECT RELEASE_LOCK(%s)", name)  # and nobody at all holds it
    assert inspector.release(holder, actor=ACTOR, audit=audit).status == "holder_changed"
    assert scalar(first, "SELECT 1") == 1
    results = [e.result for e in audit.entries(200) if name in e.target]
    assert results == ["holder_changed", "holder_changed"]


def test_release_denied_without_connection_admin(mli, db, session, closing, make_user, uid):
    url = make_user("k", "SELECT, INSERT, UPDATE, CREATE")
    limited = Database("main", parse_url(url))
    conn, name = session(), f"lc:{uid}:deny"
    pid = hold(conn, name)
    inspector = closing(MysqlInspector(limited, source="metadata_lock_info"))
    listing = inspector.holders([job(uid, name)])
    [holder] = [h for h in listing.holders if h.key == name]
    assert holder.pid == pid and holder.user is None and "PROCESS" in (holder.hidden or "")
    assert any("grant PROCESS" in note for note in listing.notes)
    audit = closing(AuditLog(limited))
    result = inspector.release(holder, actor=ACTOR, audit=audit)
    assert result.status == "denied"
    assert "CONNECTION ADMIN" in result.message and str(pid) in result.message
    assert scalar(conn, "SELECT IS_USED_LOCK(%s)", name) == pid
    assert [e.result for e in audit.entries(200) if name in e.target] == ["denied"]


def test_failing_audit_write_kills_nothing(db, session, closing, mysql_url, uid) -> None:
    # A database of its own: MariaDB's default install grants every account (PUBLIC) all
    # privileges on `test` and `test_%`, so the account there could write the audit table.
    own, user = f"lcaudit_{uid}", f"lc_{uid}a"
    root = closing(connect(mysql_url))
    with root.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{own}`")
        cur.execute(f"CREATE USER '{user}'@'%' IDENTIFIED BY 'pw{uid}'")
        cur.execute(f"GRANT SELECT ON `{own}`.* TO '{user}'@'%'")  # no CREATE, no INSERT
    u = parse_url(mysql_url)
    url = f"mysql://{user}:pw{uid}@{u.host}:{u.port or 3306}/{own}"
    try:
        _audit_write_fails(db, session, closing, url, uid)
    finally:
        with root.cursor() as cur:
            cur.execute(f"DROP USER IF EXISTS '{user}'@'%'")
            cur.execute(f"DROP DATABASE IF EXISTS `{own}`")


def _audit_write_fails(db, session, closing, url, uid) -> None:
    conn, name = session(), f"lc:{uid}:audit"
    pid = hold(conn, name)
    inspector = closing(MysqlInspector(db, source="is_used_lock"))  # root: could kill
    [holder] = rows_for(inspector, [job(uid, name)], name)
    audit = closing(AuditLog(Database("main", parse_url(url))))
    result = inspector.release(holder, actor=ACTOR, audit=audit)
    assert result.status == "error" and "audit log" in result.message
    assert "nothing was done" in result.message and "pw" + uid not in result.message
    assert scalar(conn, "SELECT IS_USED_LOCK(%s)", name) == pid


def test_waiters_and_foreign_holders_are_not_released(db: Database, closing, uid) -> None:
    inspector = closing(MysqlInspector(db, source="is_used_lock"))
    audit = closing(AuditLog(db))
    for bad in (
        Holder("main", "user_lock", f"lc:{uid}", "name", False, "x", pid=1),
        Holder("other", "user_lock", f"lc:{uid}", "name", True, "x", pid=1),
        Holder("main", "lease", f"lc:{uid}", "name", True, "x", pid=1),
        Holder("main", "user_lock", f"lc:{uid}", "name", True, "x", pid=None),
    ):
        assert inspector.release(bad, actor=ACTOR, audit=audit).status == "error"
    assert not [e for e in audit.entries(200) if f"lc:{uid}" in e.target]
