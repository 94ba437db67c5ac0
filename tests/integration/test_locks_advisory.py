"""Advisory-lock backends against real PostgreSQL and MariaDB/MySQL servers."""

from __future__ import annotations

import dataclasses
import socket
import tempfile
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockconsole.backends.mysql.lock import MysqlLock
from lockconsole.backends.postgres.lock import TCP_GIVE_UP, PgSessionLock, PgXactLock
from lockconsole.config.loader import parse_config
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job, LockKey
from lockconsole.model.keys import (
    INT64_MAX,
    INT64_MIN,
    name_to_int64,
    pg_locks_identity,
    split_int64,
)

from tests.support.helpers import eventually, unavailable

PG_CLASSES = {"pg-session": PgSessionLock, "pg-xact": PgXactLock}

HOLDERS_SQL = """
    SELECT pid, classid::bigint, objid::bigint, objsubid, mode,
           (classid::bigint << 32) | objid::bigint AS key64, objid::int4 AS key2
    FROM pg_locks
    WHERE locktype = 'advisory' AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid::bigint = %s AND objid::bigint = %s AND objsubid = %s
"""


def build_job(url: str, name: str, strategy: str, key: str | None = None) -> tuple[Job, Database]:
    """A Job and its Database, built through parse_config like a real lockconsole.toml."""
    key_line = f"key = {key}\n" if key is not None else ""
    cfg = parse_config(
        f'[databases.db]\nurl = "{url}"\n\n[jobs."{name}"]\nstrategy = "{strategy}"\n{key_line}'
    )
    job = cfg.job(name)
    return job, cfg.database_for(job)


@pytest.fixture
def closer() -> Iterator[Callable[[Any], Any]]:
    """Register lock objects; every one is closed when the test ends, pass or fail."""
    opened: list[Any] = []

    def track(lock: Any) -> Any:
        opened.append(lock)
        return lock

    yield track
    for lock in opened:
        lock.close()


def holders(pg_conn: Any, key: LockKey) -> list[tuple[Any, ...]]:
    """Granted advisory rows for `key` in the current database."""
    return pg_conn.execute(HOLDERS_SQL, pg_locks_identity(key)).fetchall()


def in_thread(fn: Callable[[], Any], timeout: float = 20.0) -> Any:
    """Run fn on another thread (like the watchdog) and fail the test if it hangs."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(fn()), daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"{fn} did not return within {timeout}s"
    return result[0]


def with_password(url: str, secret: str, database: str | None = None) -> str:
    """`url` with a password (and optionally another database) put in."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{parts.username or 'root'}:{secret}@{host}{port}"
    path = f"/{database}" if database else parts.path
    return urlunsplit((parts.scheme, netloc, path, parts.query, ""))


def unique_int64(uid: str) -> int:
    return -(int(uid, 16) + 12345)  # negative, distinct per test


# --- PostgreSQL ---------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_second_lock_skips_until_release(pg_url: str, uid: str, strategy: str, closer) -> None:
    job, db = build_job(pg_url, f"skip_{uid}", strategy)
    cls = PG_CLASSES[strategy]
    first = closer(cls(job, db, application_name=f"first-{uid}"))
    second = closer(cls(job, db, application_name=f"second-{uid}"))
    assert first.strategy == strategy and first.fencing_token is None
    assert first.acquire() is True
    assert second.acquire() is False
    assert second.held is False
    first.release()
    assert first.lost_on_release is False
    assert second.acquire() is True
    second.release()


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_session_id_is_backend_pid(pg_url: str, pg_conn: Any, uid: str, strategy, closer) -> None:
    job, db = build_job(pg_url, f"pid_{uid}", strategy)
    app = f"lc-pid-{uid}"
    lock = closer(PG_CLASSES[strategy](job, db, application_name=app))
    assert lock.session_id is None
    assert lock.acquire()
    (pid,) = pg_conn.execute(
        "select pid from pg_stat_activity where application_name = %s", (app,)
    ).fetchone()
    assert lock.session_id == pid
    assert [row[0] for row in holders(pg_conn, job.key)] == [pid]
    lock.release()


@pytest.mark.parametrize(
    "key", [INT64_MIN, INT64_MAX, -1, -4294967301, None], ids=["min", "max", "-1", "neg", "uid"]
)
@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_int64_key_in_pg_locks(own_database, uid: str, strategy: str, key, closer) -> None:
    # a database of its own: the fixed keys are the same in every run of this test (another
    # worker's, another checkout's), and advisory locks are per database
    value = unique_int64(uid) if key is None else key
    job, db = build_job(own_database, f"k64_{uid}", strategy, str(value))
    lock = closer(PG_CLASSES[strategy](job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    classid, objid = split_int64(value)
    with psycopg.connect(own_database, autocommit=True) as conn:
        rows = holders(conn, job.key)
        assert rows == [(lock.session_id, classid, objid, 1, "ExclusiveLock", value, rows[0][6])]
        assert lock.still_held() is True
        lock.release()
        assert holders(conn, job.key) == []


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_int4_pair_key_in_pg_locks(pg_url, pg_conn, uid: str, strategy: str, closer) -> None:
    key1, key2 = int(uid[:7], 16), -(int(uid[7:], 16) + 2)
    job, db = build_job(pg_url, f"pair_{uid}", strategy, f"[{key1}, {key2}]")
    lock = closer(PG_CLASSES[strategy](job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    rows = holders(pg_conn, job.key)
    assert len(rows) == 1
    pid, classid, objid, objsubid, mode, _, objid_as_int4 = rows[0]
    assert (pid, classid, objid, objsubid, mode) == (
        lock.session_id,
        key1,
        key2 + (1 << 32),
        2,
        "ExclusiveLock",
    )
    assert objid_as_int4 == key2
    # The same numbers as an int64 key live in the other key space.
    other, odb = build_job(
        pg_url, f"pair64_{uid}", strategy, str((key1 << 32) | (key2 & 0xFFFFFFFF))
    )
    other_lock = closer(PG_CLASSES[strategy](other, odb, application_name=f"lc-{uid}"))
    assert other_lock.acquire() is True
    assert lock.still_held() is True
    lock.release()
    other_lock.release()
    assert holders(pg_conn, job.key) == []


def test_lock_taken_by_psql_user_blocks_us(pg_url: str, pg_conn: Any, uid: str, closer) -> None:
    name = f"psql_{uid}"
    job, db = build_job(pg_url, name, "pg-session")  # key derived from the job name
    key = name_to_int64(name)
    assert job.key == LockKey("int64", key, f"sha256({name!r})")
    assert pg_conn.execute("select pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
    try:
        for cls in (PgSessionLock, PgXactLock):
            lock = closer(cls(job, db, application_name=f"lc-{uid}"))
            assert lock.acquire() is False
            assert lock.still_held() is False
    finally:
        assert pg_conn.execute("select pg_advisory_unlock(%s)", (key,)).fetchone() == (True,)
    lock = closer(PgSessionLock(job, db, application_name=f"lc-{uid}"))
    assert lock.acquire() is True
    lock.release()


def test_xact_lock_held_while_transaction_open(pg_url, pg_conn, uid: str, closer) -> None:
    job, db = build_job(pg_url, f"xact_{uid}", "pg-xact")
    lock = closer(PgXactLock(job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    assert lock.conn.info.transaction_status.name == "INTRANS"
    (state,) = pg_conn.execute(
        "select state from pg_stat_activity where pid = %s", (lock.session_id,)
    ).fetchone()
    assert state == "idle in transaction"
    assert len(holders(pg_conn, job.key)) == 1
    assert lock.still_held() is True
    lock.release()
    assert lock.conn.info.transaction_status.name == "IDLE"
    assert holders(pg_conn, job.key) == []
    assert lock.still_held() is False
    assert lock.lost_on_release is False


def test_xact_skip_ends_transaction(pg_url: str, uid: str, closer) -> None:
    job, db = build_job(pg_url, f"xskip_{uid}", "pg-xact")
    holder = closer(PgXactLock(job, db, application_name=f"lc-{uid}"))
    loser = closer(PgXactLock(job, db, application_name=f"lc-{uid}"))
    assert holder.acquire() and not loser.acquire()
    assert loser.conn.info.transaction_status.name == "IDLE"
    assert loser.session_id is not None
    holder.release(commit=False)  # ROLLBACK frees it too
    assert loser.acquire() is True
    loser.release()


def test_xact_begin_and_try_lock_in_one_round_trip(pg_url: str, uid: str, closer) -> None:
    job, db = build_job(pg_url, f"rt_{uid}", "pg-xact")
    lock = closer(PgXactLock(job, db, application_name=f"lc-{uid}"))
    with tempfile.TemporaryFile("w+") as trace:
        lock.conn.pgconn.trace(trace.fileno())
        lock.conn.pgconn.set_trace_flags(
            psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE
        )
        try:
            assert lock.acquire()
        finally:
            lock.conn.pgconn.untrace()
        trace.seek(0)
        lines = [line.split("\t") for line in trace.read().splitlines()]
    sent = []  # what the client sent before the first server reply
    for direction, _length, message, *rest in lines:
        if direction == "B":
            break
        sent.append((message, " ".join(rest)))
    assert [m for m, _ in sent].count("Sync") == 1
    text = " ".join(r for _, r in sent)
    assert '"BEGIN"' in text and "pg_try_advisory_xact_lock" in text
    assert sum(1 for line in lines if line[2] == "Sync") == 1  # one round trip in all
    lock.release()


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_lock_gone_after_close(pg_url: str, pg_conn: Any, uid: str, strategy: str, closer) -> None:
    job, db = build_job(pg_url, f"close_{uid}", strategy)
    lock = closer(PG_CLASSES[strategy](job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    assert len(holders(pg_conn, job.key)) == 1
    lock.close()
    lock.close()  # idempotent
    assert eventually(lambda: holders(pg_conn, job.key) == [])
    assert lock.still_held() is False
    lock.release()  # harmless: nothing held any more
    other = closer(PG_CLASSES[strategy](job, db, application_name=f"lc-{uid}"))
    assert other.acquire() is True
    other.release()


def test_tcp_lock_connection_gives_up_on_a_silent_peer(pg_url: str, uid: str, closer) -> None:
    job, db = build_job(pg_url, f"tcp_{uid}", "pg-session")
    lock = closer(PgSessionLock(job, db, application_name=f"lc-{uid}"))
    if not hasattr(socket, "TCP_USER_TIMEOUT") or db.url.host in (None, "") or "/" in db.url.host:
        unavailable("needs a TCP connection on Linux")
    with socket.fromfd(lock.conn.fileno(), socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == TCP_GIVE_UP * 1000


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_still_held_false_after_terminate(pg_url, pg_conn, uid: str, strategy: str, closer) -> None:
    job, db = build_job(pg_url, f"term_{uid}", strategy)
    lock = closer(PG_CLASSES[strategy](job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    assert in_thread(lock.still_held) is True
    assert pg_conn.execute(
        "select pg_terminate_backend(%s, 5000)", (lock.session_id,)
    ).fetchone() == (True,)
    assert in_thread(lock.still_held) is False
    assert in_thread(lock.still_held) is False  # and again, on the now-broken connection
    lock.release()  # no raise: the lock went with the session
    assert lock.lost_on_release is True
    lock.close()
    lock.close()
    assert holders(pg_conn, job.key) == []


def test_session_release_notes_a_lock_already_gone(pg_url, pg_conn, uid: str, closer) -> None:
    job, db = build_job(pg_url, f"gone_{uid}", "pg-session")
    lock = closer(PgSessionLock(job, db, application_name=f"lc-{uid}"))
    assert lock.acquire()
    lock.conn.execute("select pg_advisory_unlock_all()")  # lost behind our back
    assert lock.still_held() is False
    lock.release()
    assert lock.lost_on_release is True


def test_context_manager_releases_and_closes(pg_url, pg_conn, uid: str) -> None:
    job, db = build_job(pg_url, f"ctx_{uid}", "pg-session")
    with PgSessionLock(job, db, application_name=f"lc-{uid}") as lock:
        assert lock.acquire()
        assert len(holders(pg_conn, job.key)) == 1
    assert lock.conn.closed
    assert holders(pg_conn, job.key) == []


def test_pg_errors_hide_the_password(pg_url: str, uid: str) -> None:
    secret = f"s3cret{uid}"
    url = with_password(pg_url, secret, f"nosuchdb_{uid}")
    job, db = build_job(url, f"err_{uid}", "pg-session")
    with pytest.raises(DatabaseError) as info:
        PgSessionLock(job, db, application_name=f"lc-{uid}")
    assert secret not in str(info.value)
    assert "\n" not in str(info.value)


# --- MySQL / MariaDB ----------------------------------------------------------------------


def test_mysql_acquire_skip_release(mysql_url: str, mysql_conn: Any, uid: str, closer) -> None:
    job, db = build_job(mysql_url, f"my_{uid}", "mysql")
    first = closer(MysqlLock(job, db))
    second = closer(MysqlLock(job, db))
    assert first.strategy == "mysql" and first.fencing_token is None
    assert first.acquire() is True
    assert second.acquire() is False
    with mysql_conn.cursor() as cur:
        cur.execute("select IS_USED_LOCK(%s)", (job.key.value,))
        assert cur.fetchone() == (first.session_id,)
        cur.execute("select CONNECTION_ID()")
        (mine,) = cur.fetchone()
    assert first.session_id == first.conn.thread_id()
    assert len({first.session_id, second.session_id, mine}) == 3
    assert first.still_held() is True and second.still_held() is False
    first.release()
    assert first.lost_on_release is False
    assert first.still_held() is False
    assert second.acquire() is True
    assert second.still_held() is True
    second.release()
    with mysql_conn.cursor() as cur:
        cur.execute("select IS_FREE_LOCK(%s)", (job.key.value,))
        assert cur.fetchone() == (1,)


def test_mysql_kill_connection(mysql_url: str, mysql_conn: Any, uid: str, closer) -> None:
    job, db = build_job(mysql_url, f"kill_{uid}", "mysql")
    lock = closer(MysqlLock(job, db))
    assert lock.acquire()
    assert in_thread(lock.still_held) is True
    with mysql_conn.cursor() as cur:
        cur.execute(f"KILL CONNECTION {int(lock.session_id)}")
    assert in_thread(lock.still_held) is False
    assert in_thread(lock.still_held) is False
    lock.release()
    assert lock.lost_on_release is True
    lock.close()
    lock.close()

    def free() -> bool:
        with mysql_conn.cursor() as cur:
            cur.execute("select IS_FREE_LOCK(%s)", (job.key.value,))
            return cur.fetchone() == (1,)

    assert eventually(free)


def test_mysql_release_notes_a_lock_already_gone(mysql_url: str, uid: str, closer) -> None:
    job, db = build_job(mysql_url, f"mygone_{uid}", "mysql")
    lock = closer(MysqlLock(job, db))
    assert lock.acquire()
    with lock.conn.cursor() as cur:
        cur.execute("select RELEASE_LOCK(%s)", (job.key.value,))  # lost behind our back
    assert lock.still_held() is False
    lock.release()
    assert lock.lost_on_release is True


def test_mysql_null_from_get_lock_is_an_error(mysql_url: str, uid: str, closer) -> None:
    job, db = build_job(mysql_url, f"mynull_{uid}", "mysql")
    job = dataclasses.replace(job, key=LockKey("name", ""))  # MariaDB: GET_LOCK('', 0) -> NULL
    lock = closer(MysqlLock(job, db))
    with pytest.raises(DatabaseError, match="returned NULL"):
        lock.acquire()
    assert lock.held is False


def test_mysql_context_manager_and_password_masking(mysql_url, mysql_conn, uid: str) -> None:
    job, db = build_job(mysql_url, f"myctx_{uid}", "mysql")
    with MysqlLock(job, db) as lock:
        assert lock.acquire()
    assert not lock.conn.open
    with mysql_conn.cursor() as cur:
        cur.execute("select IS_FREE_LOCK(%s)", (job.key.value,))
        assert cur.fetchone() == (1,)
    secret = f"s3cret{uid}"
    bad_url = with_password(mysql_url, secret)
    job, db = build_job(bad_url, f"myerr_{uid}", "mysql")
    with pytest.raises(DatabaseError) as info:
        MysqlLock(job, db)
    assert secret not in str(info.value)


def test_pg_key_kind_checked_before_connecting(pg_url: str, uid: str) -> None:
    job, db = build_job(pg_url, f"kind_{uid}", "pg-session")
    job = dataclasses.replace(job, key=LockKey("name", "x"))
    with pytest.raises(ValueError, match="cannot be a PostgreSQL advisory lock"):
        PgSessionLock(job, db, application_name="lc")
