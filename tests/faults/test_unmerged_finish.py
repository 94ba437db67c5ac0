"""The finish of an attempt where nothing is merged, in real `lockconsole run` processes: a
lease on MariaDB and on SQLite, Redis, and PostgreSQL's advisory locks with the ledger in
another database. There the lock's last check, the outcome's write and the release are three
separate statements. (PostgreSQL's advisory locks, MariaDB's GET_LOCK and a lease on
PostgreSQL, each with the ledger in the lock's database, merge them into one statement:
test_exactly_once.py and test_merged_statements.py hold these properties there.)

- A lock lost after the job ended and taken over by another instance before the first one
  records its outcome (before its last check, or between the check and the write) is recorded
  lock_lost (exit 4), never succeeded, and the takeover's close of the attempt stands.
- The lock is still held at the moment the outcome is written: the write is stopped at the
  server by a row lock on the attempt's ledger row, and another connection looks at the lock
  while the write waits there.

Each instant is placed by a barrier in the runner or by the server, never by a sleep.
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lockconsole.model.jobs import Run

from tests.faults.fault_helpers import acquired_run, finish, runs_of, wait_for
from tests.faults.row_locks import (
    MY_POLL,
    my_query,
    my_row_locked,
    my_writes_waiting,
    pg_row_locked,
    pg_writes_waiting,
)
from tests.support.barrier import Barrier
from tests.support.helpers import mysql_connect
from tests.support.runner_helpers import lockconsole

SLOT = "2030-01-01T03:00:00+00:00"
BEFORE_CHECK = "finish_before_check"  # the job ended; the lock is not checked yet
BEFORE_RECORD = "finish_before_record"  # the lock was checked; the outcome is not written yet
SQLITE_STAMP = "%Y-%m-%d %H:%M:%S.%f"  # how the lease table stores a time on SQLite


@dataclass
class Store:
    """Where one case's lock and ledger live, how the test ends the lock, and who holds it."""

    strategy: str
    lock_url: str
    ledger_url: str
    lose: Callable[[Run], None]  # the run's holder loses the lock (nobody has it afterwards)
    holder: Callable[[Run], object]  # who holds the job's lock now, seen from elsewhere; None: free
    row_locked: Callable[[int], AbstractContextManager[None]]  # the run's ledger row, locked
    writes_waiting: Callable[[], int]  # UPDATEs of the ledger that wait for a row lock
    poll: float = 0.05  # how often writes_waiting may be asked


def _pg(url: str) -> Any:
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _pg_ledger(request: pytest.FixtureRequest, ledger_url: str) -> dict[str, Any]:
    conn = _pg(ledger_url)
    request.addfinalizer(conn.close)
    return {
        "row_locked": functools.partial(pg_row_locked, ledger_url),
        "writes_waiting": functools.partial(pg_writes_waiting, conn),
    }


def _lease_mariadb(request: pytest.FixtureRequest, uid: str) -> Store:
    url = str(request.getfixturevalue("fresh_mysql"))
    conn = mysql_connect(url)
    request.addfinalizer(conn.close)
    table = f"lease_{uid}"

    def lose(run: Run) -> None:
        my_query(
            conn, f"UPDATE {table} SET lock_until = locked_at WHERE locked_by = %s", run.instance
        )

    def holder(run: Run) -> object:
        rows = my_query(
            conn,
            f"SELECT locked_by, fencing_token FROM {table} WHERE lock_until > UTC_TIMESTAMP(3)",
        )
        return rows[0] if rows else None

    row_locked = functools.partial(my_row_locked, url)
    waiting = functools.partial(my_writes_waiting, conn)
    return Store("lease", url, url, lose, holder, row_locked, waiting, poll=MY_POLL)


def _lease_sqlite(request: pytest.FixtureRequest, uid: str, ledger_url: str | None) -> Store:
    path = Path(str(request.getfixturevalue("tmp_path"))) / "lease.db"
    url = f"sqlite:///{path}"
    table = f"lease_{uid}"

    def lose(run: Run) -> None:
        with sqlite3.connect(path) as conn:
            conn.execute(
                f"UPDATE {table} SET lock_until = locked_at WHERE locked_by = ?", (run.instance,)
            )

    def holder(run: Run) -> object:
        now = datetime.now(UTC).replace(tzinfo=None).strftime(SQLITE_STAMP)
        with sqlite3.connect(path) as conn:
            sql = f"SELECT locked_by, fencing_token FROM {table} WHERE lock_until > ?"
            return conn.execute(sql, (now,)).fetchone()

    if ledger_url is None:  # the ledger in the lease's file: no other session to block its row
        return Store("lease", url, url, lose, holder, _unused, lambda: 0)
    return Store("lease", url, ledger_url, lose, holder, **_pg_ledger(request, ledger_url))


def _unused(run_id: int) -> AbstractContextManager[None]:
    raise AssertionError("this case has no ledger row to lock from another session")


def _redis(request: pytest.FixtureRequest, uid: str, job: str, ledger_url: str) -> Store:
    import redis

    url = str(request.getfixturevalue("redis_url"))
    client = redis.Redis.from_url(url)
    request.addfinalizer(client.close)
    key = f"lc:{uid}:{job}"  # the job's key is its name, under the case's redis_prefix

    def lose(run: Run) -> None:
        assert client.delete(key) == 1

    def holder(run: Run) -> object:
        return client.get(key)  # ShedLock's value: when and by which host it was taken

    return Store("redis", url, ledger_url, lose, holder, **_pg_ledger(request, ledger_url))


def _advisory(request: pytest.FixtureRequest, strategy: str, ledger_url: str) -> Store:
    url = str(request.getfixturevalue("pg_url"))
    conn = _pg(url)
    request.addfinalizer(conn.close)

    def lose(run: Run) -> None:
        sql = "SELECT pg_terminate_backend(%s, 5000)"
        assert conn.execute(sql, (run.session_id,)).fetchone()[0]

    def holder(run: Run) -> object:
        row = conn.execute(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s",
            (run.session_id,),
        ).fetchone()
        return None if row is None else row[0]

    return Store(strategy, url, ledger_url, lose, holder, **_pg_ledger(request, ledger_url))


def _store(request: pytest.FixtureRequest, case: str, uid: str) -> Store:
    job = f"uf_{uid}"
    if case == "lease-mariadb":
        return _lease_mariadb(request, uid)
    if case == "lease-sqlite":
        return _lease_sqlite(request, uid, None)
    ledger = str(request.getfixturevalue("own_database"))
    if case == "lease-sqlite-pg-ledger":
        return _lease_sqlite(request, uid, ledger)
    if case == "redis":
        return _redis(request, uid, job, ledger)
    return _advisory(request, case.removesuffix("-apart"), ledger)


def _config(path: Path, store: Store, job: str, uid: str) -> Path:
    """One job on `main`; the ledger on `ledger` when it is another database. The watchdog's
    interval is long: the barrier places the loss, and the final check or the write meets it."""
    lines = ["[lockconsole]"]
    if store.ledger_url != store.lock_url:
        lines += ['ledger_database = "ledger"', "[databases.ledger]"]
        lines += [f"url = {json.dumps(store.ledger_url)}"]
    lines += ["[databases.main]", f"url = {json.dumps(store.lock_url)}", f"[jobs.{job}]"]
    lines += ['database = "main"', f'strategy = "{store.strategy}"', 'schedule = "* * * * *"']
    lines += ["watchdog_interval = 30.0"]
    if store.strategy == "lease":
        lines.append(f'lease_table = "lease_{uid}"')
    if store.strategy == "redis":
        lines.append(f'redis_prefix = "lc:{uid}:"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _run(config: Path, job: str, instance: str, env: dict[str, str]) -> Any:
    argv = ["run", job, "--instance", instance, "--slot", SLOT, "--json", "--", "true"]
    return lockconsole(config, *argv, env=env)


def _acquired(config: Path, job: str) -> Run:
    run = wait_for(lambda: acquired_run(config, job), what="the acquired attempt")
    assert isinstance(run, Run)
    return run


LOST_CASES = ["lease-mariadb", "lease-sqlite", "redis", "pg-session-apart", "pg-xact-apart"]
# pg-xact keeps merged statements with its ledger apart, whose finish gives way at once: it
# reaches finish_before_record there, before the check, as well as after it (where the barrier,
# already let go, no longer stops it). pg-session apart stops after the check on the same path.
LOST_POINTS = [
    (case, point)
    for case in LOST_CASES
    for point in (BEFORE_CHECK, BEFORE_RECORD)
    if (case, point) != ("pg-xact-apart", BEFORE_RECORD)
]


@pytest.mark.parametrize(("case", "point"), LOST_POINTS)
def test_a_lost_lock_taken_over_is_never_recorded_as_success(
    request: pytest.FixtureRequest,
    case: str,
    point: str,
    uid: str,
    tmp_path: Path,
    cli_env: dict[str, str],
    pg_url: str,
) -> None:
    """The first instance's job ended; its lock is lost and a second instance runs the slot
    before the first records its outcome. The first must end lock_lost, whatever the point."""
    store = _store(request, case, uid)
    job = f"uf_{uid}"
    config = _config(tmp_path / "lockconsole.toml", store, job, uid)
    barrier = Barrier(tmp_path / "barrier", point)
    first = _run(config, job, "web-1", barrier.env(cli_env))
    barrier.wait(point)
    store.lose(_acquired(config, job))
    code_b, out_b, err_b = finish(_run(config, job, "web-2", cli_env), timeout=120)
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
    barrier.release(point)
    code, out, err = finish(first, timeout=120)
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    runs = runs_of(config, job)
    assert [(r.instance, r.outcome) for r in runs] == [
        ("web-1", "lock_lost"),
        ("web-2", "succeeded"),
    ], runs


HELD_CASES = [
    "lease-mariadb",
    "lease-sqlite-pg-ledger",
    "redis",
    "pg-session-apart",
    "pg-xact-apart",
]


@pytest.mark.parametrize("case", HELD_CASES)
def test_the_lock_is_held_while_the_outcome_is_written(
    request: pytest.FixtureRequest,
    case: str,
    uid: str,
    tmp_path: Path,
    cli_env: dict[str, str],
    pg_url: str,
) -> None:
    """Another session holds the attempt's ledger row, so the runner's outcome UPDATE waits at
    the server; while it waits, the lock must still be the runner's, as it was before."""
    store = _store(request, case, uid)
    job = f"uf_{uid}"
    config = _config(tmp_path / "lockconsole.toml", store, job, uid)
    barrier = Barrier(tmp_path / "barrier", BEFORE_CHECK)
    proc = _run(config, job, "web-1", barrier.env(cli_env))
    barrier.wait(BEFORE_CHECK)
    run = _acquired(config, job)
    assert run.id is not None
    before = store.holder(run)
    assert before is not None, "the runner holds its lock while its job runs"
    with store.row_locked(run.id):
        barrier.release(BEFORE_CHECK)
        wait_for(store.writes_waiting, what="the outcome's write waiting", interval=store.poll)
        during = store.holder(run)
        still_open = [r.outcome for r in runs_of(config, job)]
    assert still_open == ["acquired"], "the outcome is not written while its row is locked"
    assert during == before, f"the lock was not held while the outcome was written: {during!r}"
    code, out, err = finish(proc, timeout=120)
    assert (code, out.get("outcome")) == (0, "succeeded"), (code, out, err)
    [done] = runs_of(config, job)
    assert done.outcome == "succeeded", done
    assert store.holder(run) is None, "released once the outcome was written"
