"""Faults survived, for real: a terminated session, kill -9, a database restart, a killed
MariaDB connection, a cut network. After each, the ledger says what happened and the
invoices table holds every tenant exactly once."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from lockconsole.engine import faultpoints as fp

from tests.faults.fault_helpers import (
    acquired_run,
    create_invoices,
    duplicate_invoices,
    finish,
    invoices,
    job_config,
    runs_of,
    start_worker,
    wait_for,
)
from tests.support.barrier import Barrier
from tests.support.helpers import unavailable
from tests.support.tcp_proxy import SwitchableProxy

SLOT = "2030-01-01T02:00:00+00:00"
TENANTS = 8
FAST = ("--tenants", str(TENANTS), "--delay", "0.01", "--slot", SLOT)
SLOW = ("--tenants", str(TENANTS), "--delay", "0.25", "--slot", SLOT)


@pytest.fixture
def setting(request, pg_url, pg_conn, uid, tmp_path):
    """(config path, job, invoices table, a connection to read invoices, dialect) for a strategy."""

    def make(strategy: str, db: str = "pg", **extra: object) -> tuple[Path, str, str, Any, str]:
        job, table = f"billing_{uid}", f"invoices_{uid}"
        if db == "mysql":
            url, conn, dialect = request.getfixturevalue("mysql_url"), None, "mysql"
            conn = request.getfixturevalue("mysql_conn")
        else:
            url, conn, dialect = pg_url, pg_conn, "postgresql"
        create_invoices(conn, dialect, table)
        request.addfinalizer(lambda: _drop(conn, dialect, table))
        extra.setdefault("watchdog_interval", 0.1)
        if strategy == "lease":
            extra.setdefault("lease_table", f"shedlock_{uid}")
        config = job_config(tmp_path / "lockconsole.toml", url, job, strategy, **extra)
        return config, job, table, conn, dialect

    return make


def _drop(conn: Any, dialect: str, table: str) -> None:
    if dialect == "mysql":
        conn.ping(reconnect=True)  # the mysql_conn fixture may have closed it already
        with conn.cursor() as cur:
            cur.execute(f"drop table if exists {table}")
    else:
        conn.execute(f"drop table if exists {table}")


def _wait_charged(conn: Any, dialect: str, table: str, at_least: int = 2) -> None:
    wait_for(lambda: len(invoices(conn, dialect, table)) >= at_least, what="first invoices")


def _assert_every_tenant_once(conn: Any, dialect: str, table: str) -> list[tuple[Any, ...]]:
    rows = invoices(conn, dialect, table)
    assert duplicate_invoices(rows) == 0
    assert sorted(r[0] for r in rows) == list(range(TENANTS)), rows
    return rows


def _kill_session(conn: Any, dialect: str, session_id: int | None) -> None:
    assert session_id is not None, "the holder has no session"
    if dialect == "mysql":
        with conn.cursor() as cur:
            cur.execute(f"KILL CONNECTION {int(session_id)}")
    else:
        assert conn.execute("select pg_terminate_backend(%s, 5000)", (session_id,)).fetchone()[0]


@pytest.mark.parametrize(
    ("strategy", "db"), [("pg-session", "pg"), ("pg-xact", "pg"), ("mysql", "mysql")]
)
def test_holder_session_killed_mid_run(setting, strategy: str, db: str, tmp_path: Path) -> None:
    """pg_terminate_backend / KILL CONNECTION on the holder: lock_lost, then a takeover."""
    config, job, table, conn, dialect = setting(strategy, db)
    barrier = Barrier(tmp_path / "barrier", "charged_2", fp.LOCK_LOST)
    a = start_worker(config, job, "web-1", table, *SLOW, barrier=barrier)
    barrier.wait("charged_2")  # the job paused mid-run, two tenants charged, the lock held
    holder = acquired_run(config, job)
    assert holder is not None
    _kill_session(conn, dialect, holder.session_id)
    barrier.wait(fp.LOCK_LOST)  # the watchdog saw the session go
    barrier.release(fp.LOCK_LOST)
    barrier.release("charged_2")
    code, out, err = finish(a)
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    assert out["charged"] == 2, out  # stopped at its next check, mid-run

    b = start_worker(config, job, "web-2", table, *FAST)
    code, out_b, err = finish(b)
    assert (code, out_b.get("outcome")) == (0, "succeeded"), (code, out_b, err)
    assert out_b["charged"] + out["charged"] == TENANTS and out_b["blocked"] == out["charged"]
    rows = _assert_every_tenant_once(conn, dialect, table)
    assert {r[2] for r in rows} == {holder.id, out_b["id"]}
    runs = runs_of(config, job)
    assert [(r.instance, r.outcome) for r in runs] == [
        ("web-1", "lock_lost"),
        ("web-2", "succeeded"),
    ]


@pytest.mark.parametrize(
    ("strategy", "db"), [("pg-session", "pg"), ("mysql", "mysql"), ("lease", "pg")]
)
def test_holder_process_kill9_mid_run(setting, strategy: str, db: str, tmp_path: Path) -> None:
    """kill -9 of the holder: a session lock is free at once; a lease stays until max_duration."""
    config, job, table, conn, dialect = setting(strategy, db, max_duration="5s")
    late = Barrier(tmp_path / "late", fp.BEFORE_TRY_LOCK)
    if strategy == "lease":  # web-2 is up and connected first: it tries the lock on our word
        b2 = start_worker(config, job, "web-2", table, *FAST, barrier=late)
        late.wait(fp.BEFORE_TRY_LOCK)
    barrier = Barrier(tmp_path / "barrier", "charged_2")
    a = start_worker(config, job, "web-1", table, *SLOW, barrier=barrier)
    barrier.wait("charged_2")  # the job paused mid-run, two tenants charged, the lock held
    holder = acquired_run(config, job)
    assert holder is not None
    os.kill(a.pid, signal.SIGKILL)
    a.communicate(timeout=30)
    charged_by_a = len(invoices(conn, dialect, table))
    assert charged_by_a == 2

    if strategy == "lease":  # the row still says web-1 until lock_until
        late.release(fp.BEFORE_TRY_LOCK)
        code, out, err = finish(b2)
        assert (code, out.get("outcome")) == (3, "skipped"), (code, out, err)
        assert "lock held" in out["message"]
        lease_table = f"shedlock_{job.removeprefix('billing_')}"
        wait_for(
            lambda: (
                conn.execute(f"select lock_until <= now() from {lease_table}").fetchone() == (True,)
            ),
            what="the dead holder's lease to expire (database clock)",
        )
    b = start_worker(config, job, "web-3", table, *FAST)
    code, out_b, err = finish(b)
    assert (code, out_b.get("outcome")) == (0, "succeeded"), (code, out_b, err)
    assert out_b["blocked"] == charged_by_a
    rows = _assert_every_tenant_once(conn, dialect, table)
    assert {r[2] for r in rows} == {holder.id, out_b["id"]}
    runs = {r.instance: r for r in runs_of(config, job)}
    assert runs["web-1"].outcome == "lock_lost", "closed as abandoned by the next holder"
    assert "abandoned" in (runs["web-1"].message or "")
    assert runs["web-3"].outcome == "succeeded"
    if strategy == "lease":
        assert runs["web-2"].outcome == "skipped"
        assert out_b["token"] > holder.fencing_token
    else:
        assert len(runs) == 2


def test_network_drop_mid_run(pg_url, pg_conn, uid, tmp_path) -> None:
    """The holder's TCP connection is cut (a proxy we own): the server ends the session and
    frees the lock; the holder's watchdog reports lock_lost; the next instance takes over.
    The proxy also shows the pooler guard: pg-session needs allow_pooler = true through it."""
    parts = urlsplit(pg_url)
    if not parts.hostname:  # the embedded server of a bare machine: a Unix socket only
        unavailable("needs PostgreSQL on TCP to put a proxy in front (set LOCKCONSOLE_TEST_PG_URL)")
    proxy = SwitchableProxy((parts.hostname, parts.port or 5432))
    proxied = pg_url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{proxy.port}")
    job, table = f"billing_{uid}", f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)
    text = (
        f'[lockconsole]\nledger_database = "direct"\n[databases.main]\nurl = "{proxied}"\n'
        f'[databases.direct]\nurl = "{pg_url}"\n[jobs.{job}]\ndatabase = "main"\n'
        'strategy = "pg-session"\nwatchdog_interval = 0.1\n'
    )
    refused = tmp_path / "refused.toml"
    refused.write_text(text)
    config = tmp_path / "lockconsole.toml"
    config.write_text(text + "allow_pooler = true\n")
    try:
        code, _, err = finish(start_worker(refused, job, "web-0", table, *FAST))
        assert code == 2 and "PoolerRefused" in err and "allow_pooler = true" in err, err

        a = start_worker(config, job, "web-1", table, *SLOW)
        holder = wait_for(lambda: acquired_run(config, job), what="the holder")
        _wait_charged(pg_conn, "postgresql", table)
        proxy.cut()
        code, out, err = finish(a)
        assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
        assert "running anyway because allow_pooler = true" in err
        wait_for(
            lambda: (
                not pg_conn.execute(
                    "select 1 from pg_stat_activity where pid = %s", (holder.session_id,)
                ).fetchone()
            ),
            what="the server to end the cut session",
        )
    finally:
        proxy.close()
    direct = tmp_path / "direct.toml"
    direct.write_text(text.replace(f'url = "{proxied}"', f'url = "{pg_url}"'))
    b = start_worker(direct, job, "web-2", table, *FAST)
    code, out_b, err = finish(b)
    assert (code, out_b.get("outcome")) == (0, "succeeded"), (code, out_b, err)
    _assert_every_tenant_once(pg_conn, "postgresql", table)
    pg_conn.execute(f"drop table {table}")
    assert [r.outcome for r in runs_of(direct, job)] == ["lock_lost", "succeeded"]


# -- the database restarts mid-run (our own embedded PostgreSQL; never the shared one) -------


@pytest.fixture
def own_pg(own_postgres):
    """(URL, restart) of the session's own embedded PostgreSQL (never the shared one)."""
    return own_postgres.url, own_postgres.restart


@pytest.mark.parametrize("strategy", ["pg-session", "lease"])
def test_database_restart_mid_run(own_pg, strategy: str, uid: str, tmp_path: Path) -> None:
    import psycopg

    url, restart = own_pg
    job, table = f"billing_{uid}", f"invoices_{uid}"
    with psycopg.connect(url, autocommit=True) as conn:
        create_invoices(conn, "postgresql", table)
    extra: dict[str, object] = {"watchdog_interval": 0.1, "max_duration": "2s"}
    if strategy == "lease":  # no lock check during the run: the lease row outlives the restart
        extra.update(lease_table=f"shedlock_{uid}", watchdog_interval="1h", max_duration="1h")
    config = job_config(tmp_path / "lockconsole.toml", url, job, strategy, **extra)
    a = start_worker(config, job, "web-1", table, *SLOW)
    holder = wait_for(lambda: acquired_run(config, job), what="the holder")
    with psycopg.connect(url, autocommit=True) as conn:
        _wait_charged(conn, "postgresql", table)
    restart()
    code, out, err = finish(a)
    if strategy == "pg-session":  # the session died with the server: the watchdog sees it
        assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
        code, out_b, err = finish(start_worker(config, job, "web-2", table, *FAST))
        assert (code, out_b["outcome"]) == (0, "succeeded"), (code, out_b, err)
    else:  # the lease row survived the restart; the holder reconnects and carries on
        assert (code, out.get("outcome"), out.get("charged")) == (0, "succeeded", TENANTS), err
        code, out_b, err = finish(start_worker(config, job, "web-2", table, *FAST))
        assert (code, out_b["outcome"]) == (3, "skipped"), (code, out_b, err)
    with psycopg.connect(url, autocommit=True) as conn:
        rows = _assert_every_tenant_once(conn, "postgresql", table)
    runs = {r.instance: r for r in runs_of(config, job)}
    assert runs["web-1"].id == holder.id
    if strategy == "pg-session":
        assert runs["web-1"].outcome == "lock_lost"
        assert runs["web-2"].outcome == "succeeded" and out_b["blocked"] == len(
            [r for r in rows if r[2] == holder.id]
        )
    else:
        assert (runs["web-1"].outcome, runs["web-2"].outcome) == ("succeeded", "skipped")
    print(json.dumps({s: r.outcome for s, r in runs.items()}))
