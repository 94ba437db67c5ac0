"""PgBouncer in transaction pooling, for real: pg-session is detected and refused (exit 2)
unless allow_pooler = true; pg-xact gives exactly one run across racing processes; an
orphaned session lock on a pooled server connection is shown stale (pooler reason) by the
Console and force-released through it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console

from tests.faults.fault_helpers import job_config, runs_of, wait_for, worker_env
from tests.support.pgbouncer_fixture import (
    LOGS,
)

MARK = "import sys, time; open(sys.argv[1], 'a').write('ran\\n'); time.sleep(1)"


def run_cli(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=worker_env(),
    )


def test_pg_session_behind_pgbouncer_is_refused(pgbouncer, pg_conn, uid, tmp_path) -> None:
    job = f"sess_{uid}"
    config = job_config(tmp_path / "refused.toml", pgbouncer, job, "pg-session")
    proc = run_cli(config, job, "--json", "--", "true")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == "", (proc.returncode, err)
    (line,) = err.splitlines()
    assert line.startswith("lockconsole: job ") and "transaction pooling" in line, line
    assert "allow_pooler = true" in line and '"pg-xact"' in line and "Traceback" not in err
    assert "inet_server_port() 5432 != DSN port" in line
    assert runs_of(config, job) == [], "a refusal writes nothing"
    key = load_config(str(config)).job(job).key.value
    held = pg_conn.execute(
        "select count(*) from pg_locks where locktype = 'advisory' "
        "and objid::bigint = (%s::bigint & 4294967295) "
        "and database = (select oid from pg_database where datname = current_database())",
        (key,),
    ).fetchone()[0]
    assert held == 0, "the guard refused before taking the lock"

    forced = job_config(tmp_path / "forced.toml", pgbouncer, job, "pg-session", allow_pooler=True)
    proc = run_cli(forced, job, "--json", "--", "true")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert json.loads(out)["outcome"] == "succeeded"
    assert "running anyway because allow_pooler = true" in err


def test_pg_xact_behind_pgbouncer_runs_once(pgbouncer, uid, tmp_path) -> None:
    job = f"xact_{uid}"
    config = job_config(tmp_path / "xact.toml", pgbouncer, job, "pg-xact")
    marks = tmp_path / "marks"
    procs = [
        run_cli(
            config,
            job,
            "--instance",
            f"web-{i}",
            "--slot",
            "2030-01-01T02:00:00Z",
            "--",
            sys.executable,
            "-c",
            MARK,
            str(marks),
        )
        for i in range(4)
    ]
    codes = sorted(p.wait(timeout=60) for p in procs)
    for p in procs:
        p.communicate()
    assert codes == [0, 3, 3, 3]
    assert marks.read_text().count("ran") == 1
    assert sorted(r.outcome for r in runs_of(config, job)) == ["skipped"] * 3 + ["succeeded"]


def test_a_refused_pg_xact_try_hands_its_server_connection_back_before_the_ledger(
    pgbouncer_one_server,
    pg_url,
    uid,
    tmp_path,
) -> None:
    """A pool of one server connection: another session holds the job's lock (directly on the
    server), so the try through PgBouncer is refused; its ROLLBACK must be synced before the
    ledger's decide_run asks the same pool for a server connection, or the attempt waits on
    itself until PgBouncer's query_wait_timeout throws it out (exit 5)."""
    job = f"xone_{uid}"
    key = int(uid, 16) & 0x7FFF_FFFF
    direct = job_config(tmp_path / "direct.toml", pg_url, job, "pg-xact", key=key)
    first = run_cli(direct, job, "--slot", "2030-01-01T01:00:00Z", "--", "true")
    # the ledger's tables exist (a pg-xact holder itself needs two server connections at once)
    assert first.wait(timeout=60) == 0, first.communicate()[1]
    first.communicate()
    config = job_config(tmp_path / "one.toml", pgbouncer_one_server, job, "pg-xact", key=key)
    holder = psycopg.connect(pg_url, autocommit=True)
    try:
        assert holder.execute("select pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
        proc = run_cli(config, job, "--slot", "2030-01-01T02:00:00Z", "--json", "--", "true")
        out, err = proc.communicate(timeout=60)
    finally:
        holder.close()
    assert proc.returncode == 3, (proc.returncode, err)
    assert json.loads(out)["outcome"] == "skipped"
    skipped = [r for r in runs_of(config, job) if r.outcome == "skipped"]
    assert len(skipped) == 1 and "lock held" in (skipped[0].message or ""), skipped
    # no client waited out query_wait_timeout (the attempt would then have gone on slowly, one
    # statement at a time, after PgBouncer threw out its waiting ledger connection)
    log = LOGS[pgbouncer_one_server].read_text(errors="replace")
    assert "query_wait_timeout" not in log, log[-2000:]


def test_orphaned_session_lock_is_stale_and_released_by_the_console(
    pgbouncer,
    uid,
    tmp_path,
) -> None:
    job = f"orphan_{uid}"
    key = int(uid, 16) & 0x7FFF_FFFF
    config = load_config(
        str(
            job_config(
                tmp_path / "c.toml", pgbouncer, job, "pg-session", key=key, allow_pooler=True
            )
        )
    )
    client = psycopg.connect(pgbouncer, autocommit=True, prepare_threshold=None)
    row = client.execute("select pg_try_advisory_lock(%s), pg_backend_pid()", (key,)).fetchone()
    assert row is not None
    got, server_pid = row
    client.close()  # the client is gone; the lock stays on the pooled server connection
    assert got
    with Console(config) as console:

        def shown() -> Any:
            """The job's holder once a refresh shows it orphaned: PgBouncer takes a moment to
            unlink the closed client, and a refresh meanwhile may still see it linked."""
            (found,) = [h for h in console.snapshot().holders if h.job == job]
            return found if "PgBouncer server connection" in (found.stale or "") else None

        holder = wait_for(shown, timeout=30, what="the holder shown as orphaned", interval=0.2)
        assert holder.pid == server_pid
        result = console.release(holder)
        assert result.status == "released", result.message
        assert [h for h in console.snapshot().holders if h.job == job] == []
    print(f"stale reason: {holder.stale}")


@pytest.mark.parametrize("allow", [False])
def test_pooler_alert_without_allow_pooler(pgbouncer, uid, tmp_path, allow) -> None:
    job = f"warn_{uid}"
    config = load_config(str(job_config(tmp_path / "w.toml", pgbouncer, job, "pg-session")))
    with Console(config, read_only=True) as console:
        alerts = [a for a in console.snapshot().alerts if a.kind == "pooler"]
    assert len(alerts) == 1 and job in alerts[0].message


def test_pg_session_behind_session_pooling_is_retried_and_runs(
    pgbouncer_session,
    pg_conn,
    uid,
    tmp_path,
) -> None:
    """Session pooling is safe: the port check fails (PgBouncer's port is not the server's),
    the admin console says pool_mode session, and the lock is tried again and taken."""
    job = f"sesspool_{uid}"
    config = job_config(tmp_path / "session.toml", pgbouncer_session, job, "pg-session")
    key = load_config(str(config)).job(job).key.value
    marks = tmp_path / "marks"
    proc = run_cli(
        config,
        job,
        "--json",
        "--",
        sys.executable,
        "-c",
        "import sys, time; open(sys.argv[1], 'w').write('in'); time.sleep(30)",
        str(marks),
    )
    try:
        wait_for(marks.exists, what="the job to start")
        held = pg_conn.execute(
            "select count(*) from pg_locks where locktype = 'advisory' and granted "
            "and objid::bigint = (%s::bigint & 4294967295) "
            "and database = (select oid from pg_database where datname = current_database())",
            (key,),
        ).fetchone()[0]
        assert held == 1, "the lock is held on the server, through the session pool"
    finally:
        proc.terminate()
    out, err = proc.communicate(timeout=60)
    assert "transaction pooling" not in err and "allow_pooler" not in err, err
    (run,) = runs_of(config, job)
    assert run.outcome == "failed" and "SIGTERM" in (run.message or ""), run
