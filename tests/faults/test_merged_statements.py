"""Faults inside the merged statements of the run path (backends/postgres/merged.py), in real
`lockconsole run` processes on a real PostgreSQL.

The instant is placed by the server, not by a sleep: another connection holds a lock that the
merged statement needs, so the statement stops exactly where the test wants it, and
pg_stat_activity shows it waiting there. Then the runner's process is killed (-9) or its session
terminated, and the lock is let go:

- decide and record: the try-lock has run (pg_locks shows the advisory lock granted) and the
  record waits for the ledger table (pg-session: on the lock's session, in the same round trip;
  pg-xact: on the ledger's session). Either way no lock stays held, no attempt stays "acquired"
  or runs its job, and the next instance runs the slot.
- finish and release: the lock's check has run and the outcome UPDATE waits for its row. A killed
  process's statement still completes on the server: the outcome it wrote while the lock was
  held, then the release. A terminated session writes nothing and frees the lock; the runner then
  records lock_lost on a new connection (exit 4).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config

from tests.faults.fault_helpers import ROOT, acquired_run, job_config, runs_of, wait_for
from tests.support.barrier import Barrier


# Each test blocks its ledger's table (LOCK TABLE) and looks for the session that waits on it:
# a database of its own, so no other test (another worker's) waits there or is held up by it.
@pytest.fixture
def pg_url(pg_url: str) -> Any:
    import uuid

    import psycopg

    name = f"mg_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"create database {name}")
    try:
        yield pg_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"drop database {name} with (force)")


@pytest.fixture
def mysql_url(mysql_url: str) -> Any:
    import uuid

    from tests.support.helpers import mysql_connect

    name = f"mg_{uuid.uuid4().hex[:8]}"
    conn = mysql_connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute(f"create database {name}")
    try:
        yield mysql_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f"drop database {name}")
        conn.close()


SLOT = "2030-01-01T03:00:00+00:00"


def _run(config: Path, job: str, instance: str, barrier: Barrier | None = None) -> subprocess.Popen:
    env = barrier.env() if barrier is not None else dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LOCKCONSOLE_INSTANCE", None)
    argv = [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job]
    argv += ["--instance", instance, "--slot", SLOT, "--json", "--", "true"]
    return subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _done(proc: subprocess.Popen) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=120)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else {}, err


def _config(tmp_path: Path, url: str, job: str, strategy: str, commit: str = "durable") -> Path:
    config = job_config(tmp_path / "lockconsole.toml", url, job, strategy, ledger_commit=commit)
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        ledger.create_schema()
    return config


def _waiting(pg_conn: Any, job: str | None = None) -> int | None:
    """The pid of a backend of ours whose statement on the ledger waits for a lock, else None
    (with `job`: that job's lock session, or a ledger session, not a session another test's
    runner left still finishing its write)."""
    row = pg_conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND query LIKE %s "
        "AND (%s::text IS NULL OR application_name LIKE %s"
        " OR application_name = 'lockconsole-ledger')",
        ("%lockconsole_runs%", job, f"lockconsole:{job}@%"),
    ).fetchone()
    return None if row is None else int(row[0])


def _lock_session(pg_conn: Any, job: str, instance: str) -> int:
    """The pid of the runner's lock session."""
    return int(
        pg_conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name = %s",
            (f"lockconsole:{job}@{instance}",),
        ).fetchone()[0]
    )


def _advisory_locks(pg_conn: Any, pid: int) -> int:
    return int(
        pg_conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid = %s",
            (pid,),
        ).fetchone()[0]
    )


def _fault(fault: str, proc: subprocess.Popen, pg_conn: Any, pid: int) -> None:
    if fault == "kill9":
        proc.kill()
        proc.wait(60)
    else:
        assert pg_conn.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,)).fetchone()[0]


@pytest.mark.parametrize("commit", ["durable", "async"])  # async waits for the acquired row
@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
@pytest.mark.parametrize("fault", ["kill9", "terminate"])
def test_a_fault_between_the_try_lock_and_the_record(
    pg_url, pg_conn, tmp_path, uid, fault, strategy, commit
):
    import psycopg

    job = f"mg_{uid}"
    config = _config(tmp_path, pg_url, job, strategy, commit)
    blocker = psycopg.connect(pg_url)
    try:
        blocker.execute("LOCK TABLE lockconsole_runs IN ACCESS EXCLUSIVE MODE")
        first = _run(config, job, "web-1")
        waiting = wait_for(lambda: _waiting(pg_conn, job), what="the record waiting")
        pid = _lock_session(pg_conn, job, "web-1")  # pg-xact records on a second session
        assert _advisory_locks(pg_conn, pid) == 1  # the try-lock ran; nothing is recorded yet
        assert waiting == pid or strategy == "pg-xact"
        _fault(fault, first, pg_conn, pid)
    finally:
        blocker.rollback()
        blocker.close()
    code, out, err = _done(first)
    if fault == "terminate":  # pg-session: no record (exit 5); pg-xact: recorded, then lost
        assert code == (5 if strategy == "pg-session" else 4), (code, out, err)
    wait_for(lambda: _advisory_locks(pg_conn, pid) == 0, what="the lock let go")
    code_b, out_b, err_b = _done(_run(config, job, "web-2"))
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
    runs = runs_of(config, job)
    assert [r.outcome for r in runs if r.instance == "web-2"] == ["succeeded"]
    first_runs = [r.outcome for r in runs if r.instance == "web-1"]
    if fault == "terminate" and strategy == "pg-session":
        assert first_runs == []  # the record rolled back with the session
    else:  # committed before the loss was noticed: closed as lock_lost, never run
        assert first_runs in ([], ["lock_lost"]), first_runs


@pytest.mark.parametrize("commit", ["durable", "async"])  # async waits for the acquired row
@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
@pytest.mark.parametrize("fault", ["kill9", "terminate"])
def test_a_fault_inside_finish_and_release(pg_url, pg_conn, tmp_path, uid, fault, strategy, commit):
    import psycopg

    job = f"mg_{uid}"
    config = _config(tmp_path, pg_url, job, strategy, commit)
    barrier = Barrier(tmp_path / "barrier", "finish_before_check")
    first = _run(config, job, "web-1", barrier)
    barrier.wait("finish_before_check")
    held = acquired_run(config, job)
    assert held is not None and held.session_id is not None
    blocker = psycopg.connect(pg_url)
    try:
        blocker.execute("SELECT 1 FROM lockconsole_runs WHERE id = %s FOR UPDATE", (held.id,))
        barrier.release("finish_before_check")
        pid = wait_for(lambda: _waiting(pg_conn), what="the outcome waiting")
        assert pid == held.session_id  # on the lock's own session, inside its transaction
        assert _advisory_locks(pg_conn, pid) == 1  # checked, not yet written nor released
        _fault(fault, first, pg_conn, pid)
    finally:
        blocker.rollback()
        blocker.close()
    code, out, err = _done(first)
    wait_for(lambda: _advisory_locks(pg_conn, pid) == 0, what="the lock let go")
    [run] = wait_for(
        lambda: [r for r in runs_of(config, job) if r.outcome != "acquired"] or None,
        what="the attempt closed",
    )
    if fault == "kill9":  # the statement ran to its end on the server: written while held
        assert run.outcome == "succeeded" and run.exit_code == 0
    else:  # nothing written by the dead session; the runner closed it as lock_lost
        assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
        assert run.outcome == "lock_lost"
    code_b, out_b, _ = _done(_run(config, job, "web-2"))
    expected = (3, "skipped") if run.outcome == "succeeded" else (0, "succeeded")
    assert (code_b, out_b.get("outcome")) == expected


# -- MariaDB/MySQL: the same faults around the statements sent together on the lock's connection


def _my(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    conn.ping()
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return list(cur.fetchall())


def _my_holder(mysql_conn: Any, job: str) -> int | None:
    (holder,) = _my(mysql_conn, "SELECT IS_USED_LOCK(%s)", job)[0]
    return None if holder is None else int(holder)


def _my_waiting(mysql_conn: Any, what: str) -> int | None:
    """The id of a connection in this test's database whose statement on the ledger waits for
    a lock, else None (the processlist shows the whole server, other tests' ledgers too)."""
    rows = _my(
        mysql_conn,
        "SELECT id FROM information_schema.processlist WHERE info LIKE %s "
        "AND db = DATABASE() AND id <> CONNECTION_ID() AND command = 'Query' "
        "AND (state LIKE 'Waiting%%' OR id IN (SELECT trx_mysql_thread_id "
        "FROM information_schema.innodb_trx WHERE trx_state = 'LOCK WAIT'))",
        what,
    )
    return int(rows[0][0]) if rows else None


def _my_config(tmp_path: Path, url: str, job: str) -> Path:
    config = job_config(tmp_path / "lockconsole.toml", url, job, "mysql")
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        ledger.create_schema()
    return config


@pytest.mark.parametrize("fault", ["kill9", "kill_connection"])
def test_mysql_a_fault_between_the_try_lock_and_the_record(
    mysql_url, mysql_conn, tmp_path, uid, fault
):
    import pymysql

    from lockconsole.config.urls import parse_url

    job = f"mg_{uid}"
    config = _my_config(tmp_path, mysql_url, job)
    u = parse_url(mysql_url)
    blocker = pymysql.connect(
        host=u.host,
        port=u.port or 3306,
        user=u.user,
        password=u.password or "",
        database=u.database,
        autocommit=True,
    )
    try:
        _my(blocker, "LOCK TABLES lockconsole_runs WRITE")
        first = _run(config, job, "web-1")
        waiting = wait_for(lambda: _my_waiting(mysql_conn, "%lockconsole_runs%"), what="waiting")
        assert _my_holder(mysql_conn, job) == waiting  # GET_LOCK ran; nothing is recorded yet
        if fault == "kill9":
            first.kill()
            first.wait(60)
        else:
            _my(mysql_conn, f"KILL CONNECTION {waiting}")
    finally:
        _my(blocker, "UNLOCK TABLES")
        blocker.close()
    code, out, err = _done(first)
    if fault == "kill_connection":
        assert code == 5, (code, out, err)
    wait_for(lambda: _my_holder(mysql_conn, job) is None, what="the lock let go")
    code_b, out_b, err_b = _done(_run(config, job, "web-2"))
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
    runs = runs_of(config, job)
    assert [r.outcome for r in runs if r.instance == "web-2"] == ["succeeded"]
    assert [r.outcome for r in runs if r.instance == "web-1"] in ([], ["lock_lost"])


@pytest.mark.parametrize("fault", ["kill9", "kill_connection"])
def test_mysql_a_fault_inside_finish_and_release(mysql_url, mysql_conn, tmp_path, uid, fault):
    import pymysql

    from lockconsole.config.urls import parse_url

    job = f"mg_{uid}"
    config = _my_config(tmp_path, mysql_url, job)
    barrier = Barrier(tmp_path / "barrier", "finish_before_check")
    first = _run(config, job, "web-1", barrier)
    barrier.wait("finish_before_check")
    held = acquired_run(config, job)
    assert held is not None and held.session_id is not None
    u = parse_url(mysql_url)
    blocker = pymysql.connect(
        host=u.host,
        port=u.port or 3306,
        user=u.user,
        password=u.password or "",
        database=u.database,
        autocommit=False,
    )
    try:
        _my(blocker, "SELECT id FROM lockconsole_runs WHERE id = %s FOR UPDATE", held.id)
        barrier.release("finish_before_check")
        waiting = wait_for(lambda: _my_waiting(mysql_conn, "%UPDATE lockconsole_runs%"), what="w")
        assert waiting == held.session_id == _my_holder(mysql_conn, job)  # checked, still held
        if fault == "kill9":
            first.kill()
            first.wait(60)
        else:
            _my(mysql_conn, f"KILL CONNECTION {waiting}")
    finally:
        blocker.rollback()
        blocker.close()
    code, out, err = _done(first)
    wait_for(lambda: _my_holder(mysql_conn, job) is None, what="the lock let go")
    [run] = wait_for(
        lambda: [r for r in runs_of(config, job) if r.outcome != "acquired"] or None,
        what="the attempt closed",
    )
    if fault == "kill9":  # the UPDATE ran to its end on the server: written while held
        assert run.outcome == "succeeded" and run.exit_code == 0
    else:  # the UPDATE died with its connection; the runner closed the attempt as lock_lost
        assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
        assert run.outcome == "lock_lost"


# -- a lease on PostgreSQL: its acquire and the attempt's record share one transaction


@pytest.mark.parametrize("fault", ["kill9", "terminate"])
def test_lease_a_fault_between_the_acquire_and_the_record(pg_url, pg_conn, tmp_path, uid, fault):
    import psycopg

    job, table = f"mg_{uid}", f"shedlock_mg_{uid}"
    config = job_config(tmp_path / "lockconsole.toml", pg_url, job, "lease", lease_table=table)
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        ledger.create_schema()
    blocker = psycopg.connect(pg_url)
    try:
        blocker.execute("LOCK TABLE lockconsole_runs IN ACCESS EXCLUSIVE MODE")
        first = _run(config, job, "web-1")
        pid = wait_for(lambda: _waiting(pg_conn), what="the record waiting")
        _fault(fault, first, pg_conn, pid)
    finally:
        blocker.rollback()
        blocker.close()
    code, out, err = _done(first)
    held = f"SELECT count(*) FROM {table} WHERE name = %s AND lock_until > now() AT TIME ZONE 'utc'"
    if fault == "terminate":  # the lease and the record rolled back together
        assert code == 5, (code, out, err)
        assert pg_conn.execute(held, (job,)).fetchone()[0] == 0
    else:  # committed: a killed holder's lease runs until lock_until; let it run out
        gone = "SELECT count(*) = 0 FROM pg_stat_activity WHERE pid = %s"
        wait_for(lambda: pg_conn.execute(gone, (pid,)).fetchone()[0], what="its session ended")
        # killed before its first statement made the lease table: no lease to run out then
        if pg_conn.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is not None:
            pg_conn.execute(f"UPDATE {table} SET lock_until = locked_at WHERE name = %s", (job,))
    code_b, out_b, err_b = _done(_run(config, job, "web-2"))
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
    first_runs = [r.outcome for r in runs_of(config, job) if r.instance == "web-1"]
    assert first_runs == [] if fault == "terminate" else first_runs in ([], ["lock_lost"])
