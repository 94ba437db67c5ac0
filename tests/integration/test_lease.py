"""The ShedLock-compatible lease backend on real PostgreSQL, MariaDB and SQLite (no mocks)."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import inspect, make_url, text

from lockconsole.backends.lease.lock import LeaseLock
from lockconsole.backends.lease.table import lease_table
from lockconsole.backends.sa import engine_for
from lockconsole.config.urls import parse_url
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job, LockKey

from tests.support.helpers import wait_for

DIALECTS = ["postgresql", "mysql", "sqlite"]


@dataclass
class Env:
    """One database under test: its URL, a helper engine and the lease table of this test."""

    url: str
    dialect: str
    engine: Any
    table: str

    def lock(
        self,
        owner: str,
        *,
        name: str = "job",
        max_duration: float = 60,
        min_hold: float = 0,
        table: str | None = None,
    ) -> LeaseLock:
        job = Job(
            name=name,
            database="main",
            strategy="lease",
            key=LockKey("name", name),
            max_duration=timedelta(seconds=max_duration),
            min_hold=timedelta(seconds=min_hold),
            lease_table=table or self.table,
        )
        return LeaseLock(job, Database("main", parse_url(self.url)), owner=owner)

    def sql(self, statement: str, **params: Any) -> Any:
        """Run one statement in its own transaction; rows for a SELECT, else the row count."""
        with self.engine.begin() as conn:
            result = conn.execute(text(statement), params)
            return result.all() if result.returns_rows else result.rowcount

    def row(self, name: str = "job") -> Any:
        rows = self.sql(f"SELECT * FROM {self.table} WHERE name = :n", n=name)
        return rows[0] if rows else None


@pytest.fixture(params=DIALECTS)
def env(request: pytest.FixtureRequest, tmp_path: Path, uid: str) -> Iterator[Env]:
    dialect = request.param
    if dialect == "postgresql":
        url = request.getfixturevalue("pg_url")
    elif dialect == "mysql":
        url = request.getfixturevalue("mysql_url")
    else:
        url = f"sqlite:///{tmp_path / 'lease.db'}"
    engine = engine_for(parse_url(url))
    e = Env(url, dialect, engine, f"shedlock_{uid}")
    yield e
    with engine.begin() as conn:
        lease_table(e.table, dialect).drop(conn, checkfirst=True)
    engine.dispose()


@pytest.fixture
def locks() -> Iterator[Callable[[LeaseLock], LeaseLock]]:
    """Register a lock to be closed after the test."""
    opened: list[LeaseLock] = []
    yield lambda lock: opened.append(lock) or lock
    for lock in opened:
        lock.close()


# ShedLock's own DDL and statements (its README and SqlStatementsSource) with {t} for the table.
SHEDLOCK_DDL = {
    "postgresql": "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, "
    "locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
    "mysql": "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, "
    "locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), "
    "locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
}
SHEDLOCK_DDL["sqlite"] = SHEDLOCK_DDL["postgresql"]
PG_NOW = "timezone('utc', CURRENT_TIMESTAMP)"
SHEDLOCK_INSERT = {
    "postgresql": "INSERT INTO {t}(name, lock_until, locked_at, locked_by) VALUES(:name, "
    f"{PG_NOW} + make_interval(secs => :secs), {PG_NOW}, :by) ON CONFLICT (name) DO UPDATE "
    f"SET lock_until = {PG_NOW} + make_interval(secs => :secs), locked_at = {PG_NOW}, "
    f"locked_by = :by WHERE {{t}}.name = :name AND {{t}}.lock_until <= {PG_NOW}",
    "mysql": "INSERT IGNORE INTO {t}(name, lock_until, locked_at, locked_by) VALUES(:name, "
    "TIMESTAMPADD(MICROSECOND, :micros, UTC_TIMESTAMP(3)), UTC_TIMESTAMP(3), :by)",
    "sqlite": "INSERT INTO {t}(name, lock_until, locked_at, locked_by) "
    "VALUES(:name, :until, :now, :by)",
}
SHEDLOCK_UPDATE = {
    "postgresql": f"UPDATE {{t}} SET lock_until = {PG_NOW} + make_interval(secs => :secs), "
    f"locked_at = {PG_NOW}, locked_by = :by WHERE name = :name AND lock_until <= {PG_NOW}",
    "mysql": "UPDATE {t} SET lock_until = TIMESTAMPADD(MICROSECOND, :micros, UTC_TIMESTAMP(3)), "
    "locked_at = UTC_TIMESTAMP(3), locked_by = :by WHERE name = :name "
    "AND lock_until <= UTC_TIMESTAMP(3)",
    "sqlite": "UPDATE {t} SET lock_until = :until, locked_at = :now, locked_by = :by "
    "WHERE name = :name AND lock_until <= :now",
}


def _stamp(value: datetime) -> str:
    """A UTC datetime as SQLAlchemy stores it in SQLite (what a SQLite ShedLock row holds)."""
    return value.strftime("%Y-%m-%d %H:%M:%S.%f")


def shedlock(env: Env, kind: str, *, seconds: float, by: str = "shedlock-app") -> int:
    """Run ShedLock's INSERT or acquire UPDATE with lock_until = now + seconds; rows affected."""
    statement = (SHEDLOCK_INSERT if kind == "insert" else SHEDLOCK_UPDATE)[env.dialect]
    now = datetime.now(UTC).replace(tzinfo=None)
    params = {
        "name": "job",
        "by": by,
        "secs": seconds,
        "micros": int(seconds * 1_000_000),
        "now": _stamp(now),
        "until": _stamp(now + timedelta(seconds=seconds)),
    }
    used = {k: v for k, v in params.items() if f":{k}" in statement}
    return int(env.sql(statement.format(t=env.table), **used))


def test_table_is_created_with_the_fencing_column(env: Env, locks: Any) -> None:
    lock = locks(env.lock("a"))
    assert lock.acquire() is True
    columns = {c["name"] for c in inspect(env.engine).get_columns(env.table)}
    assert columns == {"name", "lock_until", "locked_at", "locked_by", "fencing_token"}
    row = env.row()
    assert (row.locked_by, row.fencing_token) == ("a", 1)
    assert lock.fencing_token == 1 and lock.session_id is None and lock.still_held()


def test_schema_qualified_table(env: Env, locks: Any) -> None:
    schema = {"postgresql": "public", "mysql": env.engine.url.database, "sqlite": "main"}
    lock = locks(env.lock("a", table=f"{schema[env.dialect]}.{env.table}"))
    assert lock.acquire() is True and lock.fencing_token == 1
    assert locks(env.lock("b", table=f"{schema[env.dialect]}.{env.table}")).acquire() is False
    lock.release()
    assert env.row().locked_by == "a"


def test_second_owner_refused_while_held_then_wins_with_a_higher_token(
    env: Env, locks: Any
) -> None:
    a, b = locks(env.lock("a")), locks(env.lock("b"))
    assert a.acquire() is True
    assert b.acquire() is False and b.fencing_token is None
    assert a.acquire() is False  # held, even by the same owner (ShedLock semantics)
    a.release()
    assert a.lost_before_release is False and a.still_held() is False
    assert b.acquire() is True
    assert b.fencing_token is not None and b.fencing_token > 1
    assert b.still_held() and env.row().locked_by == "b"
    b.release()
    assert a.acquire() is True and a.fencing_token == b.fencing_token + 1
    assert env.sql(f"SELECT COUNT(*) FROM {env.table}")[0][0] == 1  # never deleted


def test_min_hold_keeps_the_lease_after_release(env: Env, locks: Any) -> None:
    # min_hold outlasts the next two statements by far, even on a loaded machine
    a, b = locks(env.lock("a", min_hold=4)), locks(env.lock("b"))
    assert a.acquire() is True
    a.release()
    assert a.lost_before_release is False
    assert b.acquire() is False
    wait_for(b.acquire, what="the lease to pass min_hold (database clock)")
    assert b.fencing_token == 2


def test_max_duration_expiry_hands_the_lease_over(env: Env, locks: Any) -> None:
    # max_duration outlasts the next three statements by far, even on a loaded machine
    a, b = locks(env.lock("a", max_duration=3)), locks(env.lock("b"))
    assert a.acquire() is True and a.still_held()
    assert b.acquire() is False
    wait_for(lambda: a.still_held() is False, what="the lease to expire (database clock)")
    assert b.acquire() is True and b.fencing_token > a.fencing_token
    assert a.still_held() is False
    before = env.row()
    a.release()
    assert a.lost_before_release is True
    assert env.row() == before and b.still_held()


def test_shedlock_holder_excludes_us_and_expired_row_is_taken(env: Env, locks: Any) -> None:
    env.sql(SHEDLOCK_DDL[env.dialect].format(t=env.table))
    assert shedlock(env, "insert", seconds=60) == 1
    lock = locks(env.lock("a"))
    assert lock.acquire() is False and lock.still_held() is False
    columns = {c["name"] for c in inspect(env.engine).get_columns(env.table)}
    assert "fencing_token" not in columns  # someone else's table: never altered
    env.sql(f"UPDATE {env.table} SET lock_until = locked_at WHERE name = 'job'")
    assert lock.acquire() is True and lock.fencing_token is None and lock.still_held()
    assert env.row().locked_by == "a"
    # ShedLock's own acquire finds the row held by us.
    assert shedlock(env, "update", seconds=60) == 0
    if env.dialect == "postgresql":
        assert shedlock(env, "insert", seconds=60) == 0
    lock.release()
    assert lock.lost_before_release is False
    assert shedlock(env, "update", seconds=60) == 1
    assert env.row().locked_by == "shedlock-app"


def test_shedlock_row_in_our_table_is_taken_with_a_growing_token(env: Env, locks: Any) -> None:
    other = locks(env.lock("a", name="other"))
    assert other.acquire() is True  # creates our table (with fencing_token)
    assert shedlock(env, "insert", seconds=-5) == 1
    assert env.row().fencing_token is None
    a = locks(env.lock("a"))
    assert a.acquire() is True and a.fencing_token == 1
    assert shedlock(env, "update", seconds=60) == 0
    a.release()
    assert shedlock(env, "update", seconds=2.5) == 1  # ShedLock takes it; token untouched
    assert env.row().fencing_token == 1
    assert a.acquire() is False
    wait_for(a.acquire, what="ShedLock's 2.5 s lease to expire (database clock)")
    assert a.fencing_token == 2


def _kill_connection(env: Env, lock: LeaseLock) -> None:
    """End the lock's server session from another connection, as a failover would."""
    query = "SELECT pg_backend_pid()" if env.dialect == "postgresql" else "SELECT CONNECTION_ID()"
    with lock._conn.begin():
        pid = int(lock._conn.exec_driver_sql(query).scalar())
    if env.dialect == "postgresql":
        env.sql("SELECT pg_terminate_backend(:pid)", pid=pid)
    else:
        env.sql(f"KILL {pid}")


def test_a_dropped_connection_is_reopened_once(env: Env, locks: Any) -> None:
    if env.dialect == "sqlite":
        pytest.skip("SQLite has no server connection to kill")
    lock = locks(env.lock("a"))
    assert lock.acquire() is True
    _kill_connection(env, lock)
    assert lock.still_held() is True
    _kill_connection(env, lock)
    lock.release()
    assert lock.lost_before_release is False
    assert locks(env.lock("b")).acquire() is True


def test_still_held_is_false_when_the_server_is_gone(env: Env, locks: Any) -> None:
    if env.dialect == "sqlite":
        pytest.skip("SQLite has no server connection to kill")
    lock = locks(env.lock("a"))
    assert lock.acquire() is True
    _kill_connection(env, lock)
    dead = make_url(env.url).set(port=1).render_as_string(hide_password=False)
    lock.database = Database("main", parse_url(dead))
    lock._engine.dispose()
    lock._engine = None  # the reconnect goes to a port nobody listens on
    assert lock.still_held() is False  # the one reconnect is refused: no lock, no hang


def test_driver_errors_are_one_line_without_the_password(tmp_path: Path) -> None:
    job = Job("j", "main", "lease", LockKey("name", "j"), max_duration=timedelta(seconds=5))
    for raw in (
        "postgresql://postgres:s3cr%21t@127.0.0.1:1/test",
        "mysql://root:s3cr%21t@127.0.0.1:1/test",
    ):
        lock = LeaseLock(job, Database("main", parse_url(raw)), owner="a")
        with pytest.raises(DatabaseError) as caught:
            lock.acquire()
        message = str(caught.value)
        assert "s3cr" not in message and "\n" not in message and "***" in message
        assert lock.still_held() is False
        lock.close()


def _contend(url: str, table: str, owner: str, connect: bool, barrier: Any, out: Any) -> None:
    """One contender process: connect (unless racing to create the table), wait, acquire."""
    lock = Env(url, "", None, table).lock(owner)
    try:
        if connect:
            lock._connection()
        barrier.wait(30)
        got = lock.acquire()
        out.put((owner, got, lock.fencing_token, None))
    except Exception as exc:  # reported to the parent, which fails the test
        out.put((owner, None, None, f"{type(exc).__name__}: {exc}"))
    finally:
        lock.close()


@pytest.mark.parametrize("state", ["no_table", "no_row", "expired_row"])
def test_simultaneous_acquire_has_exactly_one_winner(env: Env, locks: Any, state: str) -> None:
    if state != "no_table":
        seed = locks(env.lock("seed", max_duration=0.2))
        assert seed.acquire() is True
        if state == "no_row":
            env.sql(f"DELETE FROM {env.table}")
        wait_for(lambda: seed.still_held() is False, what="the seed lease to end (database clock)")
    ctx = multiprocessing.get_context("forkserver")  # no inherited sockets; imports paid once
    ctx.set_forkserver_preload(
        ["sqlalchemy", "psycopg", "pymysql", "lockconsole.backends.lease.lock"]
    )
    contenders = 8
    barrier, out = ctx.Barrier(contenders), ctx.Queue()
    procs = [
        ctx.Process(
            target=_contend,
            args=(env.url, env.table, f"p{i}", state != "no_table", barrier, out),
        )
        for i in range(contenders)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(30)
    assert [r for r in results if r[3]] == []
    winners = [r for r in results if r[1]]
    assert len(winners) == 1, results
    assert env.row().locked_by == winners[0][0]
    assert winners[0][2] == (1 if state != "expired_row" else 2)
