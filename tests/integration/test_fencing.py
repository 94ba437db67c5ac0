"""Fencing tokens never go backwards: across a Redis FLUSHALL, a Redis restart without
persistence, and a restart of the database that issues them, on real servers."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.redis import fencing
from lockconsole.backends.redis.lock import FENCING_PREFIX, TOKEN_PREFIX, RedisLock
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database, Job, LockKey, Strategy

from tests.support.redis_fixture import (
    RedisServer,
    redis_job_config,
)
from tests.support.runner_helpers import lockconsole, runs_of
from tests.support.settings import PYTHON


def _job(uid: str, **extra: Any) -> Job:
    return Job(
        f"job_{uid}",
        "cache",
        "redis",
        LockKey("name", f"fence_{uid}"),
        max_duration=timedelta(minutes=10),
        **extra,
    )


def _take(job: Job, cache: Database, ledger: Ledger) -> RedisLock:
    lock = RedisLock(job, cache, owner="t")
    assert lock.acquire()
    lock.issue_token(ledger)
    return lock


def test_redis_token_grows_across_flushall_and_restart(
    private_redis: RedisServer, dialect_url: str, uid: str
) -> None:
    """The old holder has token 4 and keeps running; after a FLUSHALL, then after a restart
    without persistence, each next holder's token is greater (ledger on each SQL dialect)."""
    cache = Database("cache", parse_url(private_redis.url))
    job = _job(uid)
    client = redis.Redis.from_url(private_redis.url)
    with Ledger(Database("ledger", parse_url(dialect_url))) as ledger:
        for _ in range(3):
            lock = _take(job, cache, ledger)
            lock.release()
            lock.close()
        zombie = _take(job, cache, ledger)
        assert zombie.fencing_token == 4
        key = f"job-lock:default:fence_{uid}".encode()
        assert client.get(TOKEN_PREFIX.encode() + key) == f"4 {zombie.value}".encode()
        client.flushall()
        after_flush = _take(job, cache, ledger)  # Redis's counter says 1
        assert after_flush.fencing_token == 5 > zombie.fencing_token
        assert client.get(FENCING_PREFIX.encode() + key) == b"5"  # written back
        private_redis.restart()  # no persistence: the key, the counter and the note are gone
        client = redis.Redis.from_url(private_redis.url)
        after_restart = _take(job, cache, ledger)
        assert after_restart.fencing_token == 6
        for lock in (zombie, after_flush, after_restart):
            lock.close()
    client.close()


def test_redis_counter_ahead_of_the_ledger_is_the_floor(
    private_redis: RedisServer, tmp_path: Path, uid: str
) -> None:
    """A deployment whose Redis counter stood at 41 before the ledger kept tokens goes on at 42,
    and a fresh ledger (say, after a move) cannot send an older counter backwards either."""
    cache = Database("cache", parse_url(private_redis.url))
    job = _job(uid)
    client = redis.Redis.from_url(private_redis.url)
    client.set(f"{FENCING_PREFIX}job-lock:default:fence_{uid}", 41)
    with Ledger(Database("ledger", parse_url(f"sqlite:///{tmp_path / 'l.db'}"))) as ledger:
        lock = _take(job, cache, ledger)
        assert lock.fencing_token == 42
        lock.release()
        lock.close()
    client.close()


def test_lock_id_is_bounded() -> None:
    assert fencing.lock_id("job-lock:default:x") == "redis:job-lock:default:x"
    long_id = fencing.lock_id("p" * 300)
    assert long_id.startswith("redis-sha256:") and len(long_id) <= fencing.MAX_LOCK_ID
    assert long_id != fencing.lock_id("p" * 301)


def test_cli_runs_fence_across_flush_and_restart(
    pg_url: str, private_redis: RedisServer, uid: str, write_config, cli_env
) -> None:
    """`lockconsole run` three times, with a FLUSHALL and a restart between: the ledger's
    tokens of the three runs strictly grow."""
    job = f"fenced_{uid}"
    config = write_config(redis_job_config(pg_url, private_redis.url, job))
    client = redis.Redis.from_url(private_redis.url)
    tokens = []
    for day, fault in ((1, "flush"), (2, "restart"), (3, None)):
        slot = f"2026-01-0{day}T02:00:00+00:00"
        args = ("run", job, "--slot", slot, "--json", "--", PYTHON, "-c", "pass")
        proc = lockconsole(config, *args, env=cli_env)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        tokens.append(json.loads(out)["fencing_token"])
        if fault == "flush":
            client.flushall()
        elif fault == "restart":
            private_redis.restart()
            client = redis.Redis.from_url(private_redis.url)
    client.close()
    assert tokens[0] >= 1 and tokens[0] < tokens[1] < tokens[2]
    assert sorted(r.fencing_token or 0 for r in runs_of(config, job)) == tokens


def test_redis_token_survives_a_restart_of_the_ledgers_server(
    own_postgres, private_redis: RedisServer, uid: str
) -> None:
    """The ledger's high-water mark is committed before the job runs: a restart of the SQL
    server (and a flush of Redis) between two holders still gives the second a greater one."""
    cache = Database("cache", parse_url(private_redis.url))
    job = _job(uid)
    ledger_db = Database("ledger", parse_url(own_postgres.url))
    with Ledger(ledger_db) as ledger:
        first = _take(job, cache, ledger)
    own_postgres.restart()
    redis.Redis.from_url(private_redis.url).flushall()
    with Ledger(ledger_db) as ledger:
        second = _take(job, cache, ledger)
    assert second.fencing_token is not None and first.fencing_token is not None
    assert second.fencing_token > first.fencing_token
    first.close()
    second.close()


def test_lease_token_survives_a_database_restart(own_postgres, uid: str) -> None:
    """A lease's token lives in its row: committed, so a server restart between two holders
    leaves the second one a greater token."""
    from lockconsole.backends.lease.lock import LeaseLock

    db = Database("main", parse_url(own_postgres.url))
    job = Job(
        f"lease_{uid}",
        "main",
        "lease",
        LockKey("name", f"lease_{uid}"),
        max_duration=timedelta(minutes=5),
        lease_table=f"lease_{uid}",
    )
    with LeaseLock(job, db, owner="a") as first:
        assert first.acquire()
        token = first.fencing_token
        first.release()
    own_postgres.restart()
    with LeaseLock(job, db, owner="b") as second:
        assert second.acquire()
        assert token is not None and second.fencing_token == token + 1
        second.release()


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_session_locks_issue_no_token(pg_url: str, uid: str, strategy: Strategy) -> None:
    """pg-session and pg-xact issue no fencing token at all, so none can go backwards."""
    from lockconsole.backends.factory import open_lock
    from lockconsole.model.keys import pg_key_for

    job = Job(f"s_{uid}", "main", strategy, pg_key_for(f"s_{uid}", None))
    lock = open_lock(job, Database("main", parse_url(pg_url)), instance="t", application_name="t")
    try:
        assert lock.acquire() and lock.fencing_token is None
        lock.release()
    finally:
        lock.close()
