"""Exactly once, with the fault placed by a barrier in real `lockconsole run` processes:

- a run whose lock is lost after its job ended, before the outcome is written, is recorded as
  lock_lost (exit 4), never as succeeded, and never overwrites the close of the instance that
  took over (which succeeds: one success in the slot);
- an attempt left "acquired" by a killed runner is closed by `check` (abandoned), while a live
  run paused at the same point is left alone;
- a ledger that accepts INSERT but not UPDATE refuses the run before the job starts (exit 2,
  one line naming the grant), holds no lock and leaves no "acquired" row;
- a terminated session logs no "psycopg error ignored terminating <psycopg.Pipeline [BAD]>".
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.faults.fault_helpers import ROOT, job_config, runs_of, wait_for
from tests.support.barrier import Barrier
from tests.support.cli import CliResult, run_cli

SLOT = "2030-01-01T03:00:00+00:00"
CASES = [("pg-session", "pg"), ("pg-xact", "pg"), ("mysql", "mysql"), ("lease", "pg")]


@pytest.fixture
def db(request: pytest.FixtureRequest) -> Any:
    """(url, admin connection, dialect) of "pg" or "mysql"."""

    def get(which: str) -> tuple[str, Any, str]:
        if which == "mysql":
            return (
                request.getfixturevalue("mysql_url"),
                request.getfixturevalue("mysql_conn"),
                "mysql",
            )
        return request.getfixturevalue("pg_url"), request.getfixturevalue("pg_conn"), "postgresql"

    return get


def _env(config: Path, barrier: Barrier | None = None) -> dict[str, str]:
    env = barrier.env() if barrier is not None else dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["LOCKCONSOLE_CONFIG"] = str(config)
    env.pop("LOCKCONSOLE_INSTANCE", None)
    return env


def _run(
    config: Path,
    job: str,
    instance: str,
    barrier: Barrier | None = None,
    cmd: tuple[str, ...] = ("true",),
) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lockconsole",
            "run",
            job,
            "--instance",
            instance,
            "--slot",
            SLOT,
            "--json",
            "--",
            *cmd,
        ],
        env=_env(config, barrier),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(proc: subprocess.Popen) -> tuple[int, dict[str, Any], str]:
    out, err = proc.communicate(timeout=120)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else {}, err


def _sql(conn: Any, dialect: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    if dialect == "mysql":
        conn.ping()
        with conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())
    cur = conn.execute(sql, params)
    return list(cur.fetchall()) if cur.description else []


def _acquired(config: Path, job: str) -> Any:
    return wait_for(
        lambda: next((r for r in runs_of(config, job) if r.outcome == "acquired"), None),
        what="the acquired attempt",
    )


def _lose(conn: Any, dialect: str, strategy: str, run: Any, table: str) -> None:
    """The holder loses its lock: its session is ended, or its lease runs out."""
    if strategy == "lease":
        _sql(
            conn,
            dialect,
            f"update {table} set lock_until = locked_at where locked_by = %s",
            run.instance,
        )
    elif dialect == "mysql":
        _sql(conn, dialect, f"KILL CONNECTION {int(run.session_id)}")
    else:
        assert _sql(conn, dialect, "select pg_terminate_backend(%s, 5000)", run.session_id)[0][0]


def _config(tmp_path: Path, url: str, job: str, strategy: str, uid: str) -> Path:
    extra: dict[str, object] = {"watchdog_interval": 30.0}  # the barrier places the loss
    if strategy == "lease":
        extra["lease_table"] = f"shedlock_{uid}"
    tmp_path.mkdir(exist_ok=True)
    return job_config(tmp_path / "lockconsole.toml", url, job, strategy, **extra)


@pytest.mark.parametrize("point", ["finish_before_check", "finish_before_record"])
@pytest.mark.parametrize(("strategy", "which"), CASES)
def test_a_lost_lock_is_never_recorded_as_success(db, tmp_path, uid, strategy, which, point):
    """The job ended; the lock is lost and another instance takes the slot over before the
    first records its outcome (before its last check, or between the check and the write)."""
    url, conn, dialect = db(which)
    job = f"eo_{uid}"
    config = _config(tmp_path, url, job, strategy, uid)
    barrier = Barrier(tmp_path / "barrier", point)
    first = _run(config, job, "web-1", barrier)
    barrier.wait(point)
    holder = _acquired(config, job)
    _lose(conn, dialect, strategy, holder, f"shedlock_{uid}")
    code_b, out_b, err_b = _done(_run(config, job, "web-2"))
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), err_b
    barrier.release(point)
    code, out, err = _done(first)
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    assert "error ignored" not in err, err
    runs = {r.instance: r for r in runs_of(config, job) if r.outcome != "skipped"}
    assert runs["web-1"].outcome == "lock_lost" and runs["web-2"].outcome == "succeeded"
    assert runs["web-1"].exit_code == 0  # the job's own exit code is kept
    ended, began = runs["web-1"].finished_at, runs["web-2"].started_at
    assert ended is not None and ended >= began  # its real end: an overlap


@pytest.mark.parametrize(("strategy", "which"), [c for c in CASES if c[0] != "lease"])
def test_a_terminated_session_alone_is_lock_lost_without_log_noise(
    db, tmp_path, uid, strategy, which
):
    url, conn, dialect = db(which)
    job = f"eo_{uid}"
    config = _config(tmp_path, url, job, strategy, uid)
    barrier = Barrier(tmp_path / "barrier", "finish_before_check")
    first = _run(config, job, "web-1", barrier)
    barrier.wait("finish_before_check")
    _lose(conn, dialect, strategy, _acquired(config, job), "")
    barrier.release("finish_before_check")
    code, out, err = _done(first)
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    assert "error ignored" not in err and "Pipeline" not in err, err


def _check(config: Path) -> CliResult:
    return run_cli(None, "check", "--no-duplicates", "-o", "tsv", env=_env(config))


@pytest.mark.parametrize(("strategy", "which"), CASES)
def test_check_closes_abandoned_attempts_but_never_a_live_run(db, tmp_path, uid, strategy, which):
    url, conn, dialect = db(which)
    job = f"eo_{uid}"
    config = _config(tmp_path, url, job, strategy, uid)
    barrier = Barrier(tmp_path / "barrier", "finish_before_check")
    first = _run(config, job, "web-1", barrier)
    barrier.wait("finish_before_check")
    holder = _acquired(config, job)
    alive = _check(config)  # the run is alive and holds its lock: left alone
    assert "abandoned" not in alive.stdout, alive.stdout
    assert [r.outcome for r in runs_of(config, job)] == ["acquired"]
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=60)
    if strategy == "lease":  # a killed holder's lease runs until lock_until: let it run out
        _lose(conn, dialect, strategy, holder, f"shedlock_{uid}")
    found = _check(config)
    assert f"\nabandoned\t{job}\t" in found.stdout and "closed as lock_lost" in found.stdout, found
    [run] = runs_of(config, job)
    assert run.outcome == "lock_lost" and "abandoned" in (run.message or "")
    again = _check(config)  # closed once: the next check finds nothing left open
    assert "abandoned" not in again.stdout, again.stdout


@pytest.fixture
def insert_only(pg_url, pg_conn, mysql_url, mysql_conn, uid):
    """which -> (URL of a role that may SELECT and INSERT the ledger but not UPDATE it, and may
    use the lease table; the admin URL of the same database). On MariaDB a database of its own:
    every account may do anything in `test`."""
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database

    role, schema = f"lc_ins_{uid}", f"lc_eo_{uid}"
    with mysql_conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{schema}`")
    parts = urlsplit(mysql_url)
    admin = {"pg": pg_url, "mysql": urlunsplit(parts._replace(path=f"/{schema}"))}
    for url in admin.values():
        with Ledger(Database("main", parse_url(url))) as ledger:
            ledger.create_schema()
    pg_conn.execute(f"create role {role} login")
    pg_conn.execute(f"grant select, insert on lockconsole_runs to {role}")
    pg_conn.execute(f"grant select on lockconsole_controls to {role}")  # pauses must be read
    pg_conn.execute(f"grant usage on sequence lockconsole_runs_id_seq to {role}")
    pg_conn.execute(f"grant create on schema public to {role}")
    hosts = ("%", "localhost")  # 'localhost' too: an anonymous ''@localhost would win
    with mysql_conn.cursor() as cur:
        for host in hosts:
            cur.execute(f"CREATE USER '{role}'@'{host}' IDENTIFIED BY 'pw{uid}'")
            cur.execute(f"GRANT SELECT, INSERT ON `{schema}`.lockconsole_runs TO '{role}'@'{host}'")
            cur.execute(f"GRANT SELECT ON `{schema}`.lockconsole_controls TO '{role}'@'{host}'")

    def role_url(which: str) -> tuple[str, str]:
        parts = urlsplit(admin[which])
        port = f":{parts.port}" if parts.port else ""
        login = f"{role}:pw{uid}" if which == "mysql" else role
        return urlunsplit(parts._replace(netloc=f"{login}@{parts.hostname}{port}")), admin[which]

    yield role_url
    pg_conn.execute(f"revoke all on lockconsole_runs from {role}")
    pg_conn.execute(f"revoke all on lockconsole_controls from {role}")
    pg_conn.execute(f"revoke all on sequence lockconsole_runs_id_seq from {role}")
    pg_conn.execute(f"revoke create on schema public from {role}")
    pg_conn.execute(f"drop owned by {role}")
    pg_conn.execute(f"drop role if exists {role}")
    mysql_conn.ping()
    with mysql_conn.cursor() as cur:
        for host in hosts:
            cur.execute(f"DROP USER IF EXISTS '{role}'@'{host}'")
        cur.execute(f"DROP DATABASE IF EXISTS `{schema}`")


@pytest.mark.parametrize(("strategy", "which"), CASES)
def test_a_ledger_that_cannot_update_refuses_the_run(insert_only, tmp_path, uid, strategy, which):
    limited, admin = insert_only(which)
    job = f"eo_{uid}"
    config = _config(tmp_path, limited, job, strategy, uid)
    marker = tmp_path / "ran"
    proc = _run(config, job, "web-1", cmd=("touch", str(marker)))
    code, _, err = _done(proc)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2, (code, err)
    assert not marker.exists()  # the job never started
    assert any("UPDATE" in ln and "lockconsole_runs" in ln for ln in lines), err
    assert "Traceback" not in err
    admin_config = _config(tmp_path / "admin", admin, job, strategy, uid)
    assert [r for r in runs_of(admin_config, job) if r.outcome == "acquired"] == []
    held = _run(admin_config, job, "web-2")
    code_b, out_b, err_b = _done(held)  # no lock was left held: the admin role gets it at once
    assert (code_b, out_b.get("outcome")) == (0, "succeeded"), (code_b, out_b, err_b)
