"""LeaseInspector on real PostgreSQL, MariaDB and SQLite lease tables (no mocks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, select

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.lease.inspect import LeaseInspector
from lockconsole.backends.lease.lock import LeaseLock
from lockconsole.backends.lease.table import lease_table
from lockconsole.backends.sa import engine_for
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database, Job, LockKey

ACTOR = Actor("tester", "testhost")


class Env:
    """One database under test with this test's own lease table."""

    def __init__(self, url: str, table: str) -> None:
        self.db = Database("main", parse_url(url))
        self.dialect = self.db.url.dialect
        self.table = table
        self.engine = engine_for(self.db.url)
        self.locks: list[LeaseLock] = []

    def job(self, name: str, table: str | None = None) -> Job:
        return Job(
            f"job_{name}",
            "main",
            "lease",
            LockKey("name", name),
            max_duration=timedelta(minutes=10),
            lease_table=table or self.table,
        )

    def lock(self, name: str, owner: str) -> LeaseLock:
        lock = LeaseLock(self.job(name), self.db, owner=owner)
        self.locks.append(lock)
        return lock

    def insert(self, fencing: bool = True, **row: Any) -> None:
        """Write a row directly (e.g. an expired one, or one ShedLock wrote)."""
        with self.engine.begin() as conn:
            conn.execute(insert(lease_table(self.table, self.dialect, fencing=fencing)), row)

    def row(self, name: str) -> Any:
        t = lease_table(self.table, self.dialect, fencing=False)
        with self.engine.connect() as conn:
            return conn.execute(select(t).where(t.c.name == name)).first()


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def env(request: pytest.FixtureRequest, tmp_path: Path, uid: str) -> Iterator[Env]:
    if request.param == "postgresql":
        url = request.getfixturevalue("pg_url")
    elif request.param == "mysql":
        url = request.getfixturevalue("mysql_url")
    else:
        url = f"sqlite:///{tmp_path / 'lease.db'}"
    e = Env(url, f"shedlock_i{uid}")
    yield e
    for lock in e.locks:
        lock.close()
    with e.engine.begin() as conn:
        lease_table(e.table, e.dialect).drop(conn, checkfirst=True)
    e.engine.dispose()


@pytest.fixture
def closing() -> Iterator[Callable[[Any], Any]]:
    things: list[Any] = []
    yield lambda thing: things.append(thing) or thing
    for thing in reversed(things):
        thing.close()


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def test_held_rows_listed_expired_rows_not(env: Env, closing) -> None:
    assert env.lock("a", "host-1").acquire() and env.lock("b", "host-2").acquire()
    env.insert(
        name="old",
        lock_until=utcnow() - timedelta(hours=1),
        locked_at=utcnow() - timedelta(hours=2),
        locked_by="host-3",
    )
    inspector = closing(LeaseInspector(env.db, env.table))
    listing = inspector.holders([env.job("a"), env.job("b", table="other_table")])
    assert listing.source == env.table and listing.notes == ()
    by_name = {h.key: h for h in listing.holders}
    assert sorted(by_name) == ["a", "b"]
    a = by_name["a"]
    assert (a.kind, a.key_kind, a.granted, a.locked_by) == ("lease", "name", True, "host-1")
    assert a.job == "job_a" and by_name["b"].job is None  # b's job uses another table
    assert a.fencing_token == 1 and a.source == env.table
    assert a.held_since and a.lock_until and a.lock_until.tzinfo == UTC
    assert timedelta(minutes=9) < a.lock_until - a.held_since <= timedelta(minutes=10)
    assert abs(a.held_since - datetime.now(UTC)) < timedelta(minutes=1)


def test_release_expires_row_then_another_owner_acquires(env: Env, closing) -> None:
    first = env.lock("nightly", "host-1")
    assert first.acquire()
    inspector = closing(LeaseInspector(env.db, env.table))
    [holder] = inspector.holders([]).holders
    audit = closing(AuditLog(env.db))
    result = inspector.release(holder, actor=ACTOR, audit=audit)
    assert result.status == "released", result.message
    assert inspector.holders([]).holders == ()
    row = env.row("nightly")
    assert row is not None and row.locked_by == "host-1"  # expired, never deleted
    assert not first.still_held()
    second = env.lock("nightly", "host-2")
    assert second.acquire() and second.fencing_token == 2
    [entry] = [e for e in audit.entries(200) if env.table in e.target]
    assert (entry.result, entry.action) == ("released", "release")
    assert "'host-1'" in entry.target and "fencing token 1" in entry.target


def test_wrong_owner_or_token_is_holder_changed(env: Env, closing) -> None:
    assert env.lock("job", "host-1").acquire()
    inspector = closing(LeaseInspector(env.db, env.table))
    [holder] = inspector.holders([]).holders
    audit = closing(AuditLog(env.db))
    before = env.row("job")
    for stale in (replace(holder, locked_by="host-9"), replace(holder, fencing_token=7)):
        result = inspector.release(stale, actor=ACTOR, audit=audit)
        assert result.status == "holder_changed" and "nothing was done" in result.message
    assert env.row("job") == before
    assert [h.key for h in inspector.holders([]).holders] == ["job"]
    results = [e.result for e in audit.entries(200) if env.table in e.target]
    assert results == ["holder_changed", "holder_changed"]


def test_reacquired_lease_is_not_released_by_an_old_listing(env: Env, closing) -> None:
    """A table made by ShedLock has no fencing_token: locked_at tells acquisitions apart."""
    lease_table(env.table, env.dialect, fencing=False).create(env.engine)
    past = utcnow() - timedelta(seconds=30)
    env.insert(
        fencing=False,
        name="job",
        lock_until=past + timedelta(minutes=10),
        locked_at=past,
        locked_by="host-1",
    )
    inspector = closing(LeaseInspector(env.db, env.table))
    [old] = inspector.holders([]).holders
    assert old.fencing_token is None and old.locked_by == "host-1"
    audit = closing(AuditLog(env.db))
    assert inspector.release(old, actor=ACTOR, audit=audit).status == "released"
    later = env.lock("job", "host-1")  # the same owner takes it again
    assert later.acquire()
    assert inspector.release(old, actor=ACTOR, audit=audit).status == "holder_changed"
    assert later.still_held()
    [new] = inspector.holders([]).holders
    assert inspector.release(new, actor=ACTOR, audit=audit).status == "released"


def test_missing_table_is_an_empty_list_with_a_note(env: Env, closing) -> None:
    inspector = closing(LeaseInspector(env.db, env.table + "_missing"))
    listing = inspector.holders([env.job("x")])
    assert listing.holders == () and listing.source == env.table + "_missing"
    assert len(listing.notes) == 1 and "does not exist" in listing.notes[0]


def test_failing_audit_expires_nothing(tmp_path: Path, closing, uid: str) -> None:
    env = Env(f"sqlite:///{tmp_path / 'lease.db'}", f"shedlock_i{uid}")
    lock = env.lock("job", "host-1")
    assert lock.acquire()
    inspector = closing(LeaseInspector(env.db, env.table))
    [holder] = inspector.holders([]).holders
    broken = Database("main", parse_url(f"sqlite:///{tmp_path / 'missing' / 'audit.db'}"))
    result = inspector.release(holder, actor=ACTOR, audit=closing(AuditLog(broken)))
    assert result.status == "error" and "nothing was done" in result.message
    assert lock.still_held()
    lock.close()
    env.engine.dispose()
