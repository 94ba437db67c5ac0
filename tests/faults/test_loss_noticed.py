"""How soon a running job's lost lock is noticed, for the stores that keep no session: a lease
(PostgreSQL, MariaDB, SQLite) and Redis, with `lockconsole run` in a real process.

While the job runs (the runner held at its `job_started` point), the test ends the lock
itself: it deletes the Redis key, or ends the lease row. From that instant the watchdog must
flag the loss (the runner reaches its `lock_lost` point) within its next check: at most one
watchdog interval (the first check comes up to a quarter later), plus the time a check may
take (lock_check_timeout), plus slack for a loaded machine. The job then ends lock_lost.

A loss noticed only at the job's end, or a watchdog slower than its setting, fails the bound.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from lockconsole.engine.faultpoints import JOB_STARTED, LOCK_LOST

from tests.faults.fault_helpers import finish, runs_of, wait_for
from tests.support.barrier import Barrier
from tests.support.helpers import mysql_connect
from tests.support.runner_helpers import lockconsole

WATCHDOG = 1.0  # seconds between two checks of the lock
CHECK_TIMEOUT = 0.5  # seconds one check may take (the servers here answer at once)
SLACK = 1.0  # a busy 2-core machine: the watchdog's thread and the test's own polling
BOUND = 1.25 * WATCHDOG + CHECK_TIMEOUT + SLACK
JOB = [sys.executable, "-c", "import time; time.sleep(30)"]  # far longer than the bound


@dataclass
class Store:
    """One case's lock and ledger, how the test ends the lock, and how it sees a check."""

    strategy: str
    url: str  # the lock's database
    ledger: str  # the ledger's database
    end_lock: Callable[[], None]  # the runner's lock ends now, and nobody takes it
    # a reading that changes with each check of the lock the server answers (None where the
    # server cannot show one)
    checks: Callable[[], object] | None = None


def _store(request: pytest.FixtureRequest, kind: str, uid: str) -> Store:
    table = f"lease_{uid}"
    ends_lease = f"UPDATE {table} SET lock_until = locked_at WHERE locked_by = 'web-1'"
    if kind == "lease-postgresql":
        import psycopg

        url = str(request.getfixturevalue("own_database"))
        conn = psycopg.connect(url, autocommit=True)
        request.addfinalizer(conn.close)

        def end_pg() -> None:
            assert conn.execute(ends_lease).rowcount == 1

        def pg_checks() -> object:
            """When the runner's lease connection (the only other session that reads the
            lease table, in the test's own database) last began a statement."""
            row = conn.execute(
                "SELECT max(query_start) FROM pg_stat_activity WHERE datname = current_database()"
                " AND pid <> pg_backend_pid() AND query LIKE %s",
                (f"%{table}%",),
            ).fetchone()
            return None if row is None else row[0]

        return Store("lease", url, url, end_pg, pg_checks)
    if kind == "lease-mariadb":
        url = str(request.getfixturevalue("fresh_mysql"))
        my_conn = mysql_connect(url)
        request.addfinalizer(my_conn.close)

        def end_my() -> None:
            with my_conn.cursor() as cur:
                assert cur.execute(ends_lease) == 1

        return Store("lease", url, url, end_my)
    if kind == "lease-sqlite":
        path = Path(str(request.getfixturevalue("tmp_path"))) / "lease.db"

        def end_sqlite() -> None:
            with sqlite3.connect(path) as db:
                assert db.execute(ends_lease).rowcount == 1

        return Store("lease", f"sqlite:///{path}", f"sqlite:///{path}", end_sqlite)
    import redis

    url = str(request.getfixturevalue("redis_url"))
    client = redis.Redis.from_url(url)
    request.addfinalizer(client.close)
    key = f"lc:{uid}:noticed_{uid}"  # the job's key is its name, under its redis_prefix

    def end_redis() -> None:
        assert client.delete(key) == 1

    def redis_checks() -> object:
        """How many GETs the server has answered: only the watchdog's check sends one."""
        return client.info("commandstats").get("cmdstat_get", {}).get("calls", 0)

    ledger = str(request.getfixturevalue("own_database"))
    return Store("redis", url, ledger, end_redis, redis_checks)


def _config(path: Path, store: Store, job: str, uid: str) -> Path:
    lines = [
        "[lockconsole]",
        'ledger_database = "ledger"',
        "[databases.main]",
        f"url = {json.dumps(store.url)}",
        "[databases.ledger]",
        f"url = {json.dumps(store.ledger)}",
        f"[jobs.{job}]",
        'database = "main"',
        f'strategy = "{store.strategy}"',
        'schedule = "0 2 * * *"',
        f"watchdog_interval = {WATCHDOG}",
        f"lock_check_timeout = {CHECK_TIMEOUT}",
        f'lease_table = "lease_{uid}"',
        f'redis_prefix = "lc:{uid}:"',
    ]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _timed(action: Callable[[], None]) -> float:
    """When `action` began (monotonic): the loss counts from before its statement is sent."""
    began = time.monotonic()
    action()
    return began


KINDS = ["lease-postgresql", "lease-mariadb", "lease-sqlite", "redis"]
# "first": the loss comes before the watchdog's first check; "later": right after a check the
# server saw (where it can show one), so the next check is a whole interval away
CASES = [(k, "first") for k in KINDS] + [(k, "later") for k in ("lease-postgresql", "redis")]


@pytest.mark.parametrize(("kind", "phase"), CASES)
def test_a_lost_lock_is_noticed_within_one_watchdog_interval(
    request: pytest.FixtureRequest,
    kind: str,
    phase: str,
    uid: str,
    tmp_path: Path,
    cli_env: dict[str, str],
    pg_url: str,
) -> None:
    store = _store(request, kind, uid)
    job = f"noticed_{uid}"
    config = _config(tmp_path / "lockconsole.toml", store, job, uid)
    barrier = Barrier(tmp_path / "barrier", JOB_STARTED, LOCK_LOST)
    argv = ["run", job, "--instance", "web-1", "--json", "--", *JOB]
    proc = lockconsole(config, *argv, env=barrier.env(cli_env))
    barrier.wait(JOB_STARTED)  # the lock is held and watched, and the job runs
    if phase == "later":
        checks = store.checks
        assert checks is not None
        before = checks()
        wait_for(lambda: checks() != before, what="the watchdog's first check", interval=0.01)
    lost_at = _timed(store.end_lock)
    barrier.release(JOB_STARTED)
    barrier.wait(LOCK_LOST, timeout=BOUND + 60)
    noticed = time.monotonic() - lost_at
    barrier.release(LOCK_LOST)
    code, out, err = finish(proc, timeout=120)
    assert noticed <= BOUND, f"the loss was noticed {noticed:.2f} s after it, bound {BOUND:.2f} s"
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    [run] = runs_of(config, job)
    assert run.outcome == "lock_lost", run
