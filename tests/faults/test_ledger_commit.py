"""ledger_commit on a real server crash (our own embedded PostgreSQL, never the shared one).

The crash is placed by the test: the WAL writer is stopped (nothing flushes behind a commit's
back), the attempt runs, and the WAL writer is killed (-9), which makes the server end every
session and recover from the WAL on disk. What a commit waited for survives; what it did not
wait for is lost. So the test shows both halves of the setting:

- "durable" (the default): the attempt's row and its outcome survive the crash;
- "async": the "acquired" row still survives (it is flushed before the job starts), while the
  outcome, which did not wait for the flush, is gone after the crash (the outcome reads
  "acquired" again, as after a process killed before it could record its end).

A skipped row never waits for the flush, whatever the setting (no job ran: losing it loses
nothing that decides a run), so a crash right after a skip takes it back in both modes, on
every PostgreSQL strategy; the acquired row and the outcome of the attempt that held the lock
meanwhile survive it when durable.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.config.loader import load_config

STRATEGIES = ["pg-session", "pg-xact", "lease"]
SLOT = "2030-01-01T02:00:00+00:00"


@pytest.fixture
def crash_db(own_postgres, uid: str):
    """(server, URL of a database of this test's own on it)."""
    name = f"crash_{uid}"
    with psycopg.connect(own_postgres.url, autocommit=True) as admin:
        admin.execute(f"create database {name}")
    yield own_postgres, own_postgres.url.rsplit("/", 1)[0] + f"/{name}"
    with psycopg.connect(own_postgres.url, autocommit=True) as admin:
        admin.execute(f"drop database {name} with (force)")


def _config(path: Path, url: str, uid: str, strategy: str, commit: str) -> Path:
    lines = [
        "[databases.main]",
        f"url = {json.dumps(url)}",
        f"[jobs.job_{uid}]",
        'database = "main"',
        f'strategy = "{strategy}"',
        'schedule = "0 2 * * *"',
        f'ledger_commit = "{commit}"',
    ]
    if strategy == "lease":
        lines.append(f'lease_table = "shedlock_{uid}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _row(url: str, run_id: int | None) -> tuple[Any, ...] | None:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(
            "SELECT outcome, message FROM lockconsole_runs WHERE id = %s", (run_id,)
        ).fetchone()


def _warm(config: Path, job: str) -> None:
    """One attempt first: the ledger's tables exist (created durably) before the crash."""
    slot = datetime(2029, 1, 1, tzinfo=UTC)
    with run_once(job, config=str(config), slot=slot, reuse_connections=False):
        pass


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("commit", ["durable", "async"])
def test_outcome_across_a_crash(crash_db, strategy: str, commit: str, uid: str, tmp_path) -> None:
    server, url = crash_db
    config = _config(tmp_path / "lockconsole.toml", url, uid, strategy, commit)
    job = f"job_{uid}"
    _warm(config, job)
    slot = datetime.fromisoformat(SLOT)
    with server.quiet_wal():
        with run_once(job, config=str(config), slot=slot, reuse_connections=False) as run:
            assert run.acquired, run.run.message
            run_id = run.run.id
        assert run.run.outcome == "succeeded"
        assert _row(url, run_id) == ("succeeded", None)  # visible to every session at once
        server.crash()
    after = _row(url, run_id)
    assert after is not None, "the acquired row must survive a crash in both modes"
    if commit == "durable":
        assert after[0] == "succeeded", after
    else:  # the outcome did not wait for the flush: the crash took it back
        assert after[0] == "acquired", after
        with run_once(job, config=str(config), slot=slot, reuse_connections=False) as again:
            if strategy == "lease":  # the lease's release went with it: taken until it expires
                assert not again.acquired and again.run.message == "lock held by another session"
            else:  # the next attempt of the slot closes it as abandoned and runs the slot again
                assert again.acquired
        if strategy != "lease":
            assert _row(url, run_id)[0] == "lock_lost"


@pytest.mark.parametrize("commit", ["durable", "async"])
def test_acquired_row_is_flushed_before_the_job_starts(
    crash_db, commit: str, uid: str, tmp_path
) -> None:
    """The crash comes while the job runs: its "acquired" row is there after recovery."""
    server, url = crash_db
    config = _config(tmp_path / "lockconsole.toml", url, uid, "pg-session", commit)
    job = f"job_{uid}"
    _warm(config, job)
    with server.quiet_wal():
        attempt = run_once(job, config=str(config), slot=datetime.fromisoformat(SLOT))
        run = attempt.__enter__()
        assert run.acquired
        server.crash()
        assert _row(url, run.run.id) == ("acquired", None)
        attempt.__exit__(None, None, None)  # the session died with the server: lock_lost
    assert _row(url, run.run.id)[0] == "lock_lost"


def _hold(url: str, strategy: str, key: Any, table: str) -> Any:
    """Another instance's hold of the job's lock: its session's advisory lock, or a lease row."""
    holder = psycopg.connect(url, autocommit=True)
    if strategy == "lease":
        holder.execute(
            f"INSERT INTO {table} (name, lock_until, locked_at, locked_by) "  # the test's own table
            "VALUES (%s, timezone('utc', now()) + interval '1 hour', timezone('utc', now()), "
            "'another') "
            "ON CONFLICT (name) DO UPDATE SET lock_until = excluded.lock_until, "
            "locked_by = excluded.locked_by",
            (str(key),),
        )
    else:
        holder.execute("SELECT pg_advisory_lock(%s)", (key,))
    return holder


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("commit", ["durable", "async"])
def test_skip_across_a_crash(crash_db, strategy: str, commit: str, uid: str, tmp_path) -> None:
    """Another instance holds the lock: the skip is recorded and seen at once, and after a
    crash it is gone in both modes (it did not wait for the flush); the acquired row and the
    outcome of an attempt written before it, durable, are still there."""
    server, url = crash_db
    config = _config(tmp_path / "lockconsole.toml", url, uid, strategy, commit)
    job = f"job_{uid}"
    _warm(config, job)
    cfg = load_config(str(config)).job(job)
    key = cfg.key.value
    with run_once(job, config=str(config), slot=datetime(2029, 6, 1, tzinfo=UTC),
                  reuse_connections=False) as ran:  # fmt: skip
        assert ran.acquired
    with server.quiet_wal():
        holder = _hold(url, strategy, key, f"shedlock_{uid}")
        try:
            with run_once(
                job,
                config=str(config),
                slot=datetime.fromisoformat(SLOT),
                reuse_connections=False,
            ) as run:
                assert not run.acquired
            assert _row(url, run.run.id) == ("skipped", "lock held by another session")
            server.crash()
        finally:
            holder.close()
    assert _row(url, run.run.id) is None, "a skip does not wait for the flush: the crash took it"
    if commit == "durable":  # the attempt before it: its acquired row and outcome were flushed
        assert _row(url, ran.run.id) == ("succeeded", None)
    else:
        assert _row(url, ran.run.id) is not None


def test_a_paused_row_across_a_crash(crash_db, uid: str, tmp_path) -> None:
    """A paused job's attempt is recorded by a statement of its own (not the merged one): that
    row does not wait for the flush either, so a crash right after it takes it back."""
    from lockconsole.backends.ledger.pauses import Pauses
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Pause

    server, url = crash_db
    config = _config(tmp_path / "lockconsole.toml", url, uid, "pg-session", "durable")
    job = f"job_{uid}"
    _warm(config, job)
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        Pauses(ledger).pause(Pause(job, "crash test", "test@here", datetime.now(UTC)))
    with server.quiet_wal():
        with run_once(
            job, config=str(config), slot=datetime.fromisoformat(SLOT), reuse_connections=False
        ) as run:
            assert not run.acquired and run.run.outcome == "paused"
        assert _row(url, run.run.id) is not None  # visible to every session at once
        server.crash()
    assert _row(url, run.run.id) is None, "a paused row does not wait for the flush"
