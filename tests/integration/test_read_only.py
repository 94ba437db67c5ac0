"""`--read-only` is read-only for every command: each subcommand, with the flag before or after
the command word, leaves PostgreSQL and MariaDB exactly as they were (tables, ledger, audit and
lease rows, and the locks held by another client), and every mutating command refuses with one
line and exit code 2."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from lockconsole.model.keys import name_to_int64

from tests.support.cli import run_cli
from tests.support.helpers import mysql_connect

pytestmark = pytest.mark.mysql

MUTATING = [
    "run {job}",
    "run {job} -- true",
    "schedule --for 1",
    "release --job {job} --yes",
    "release --pid {pid} --yes",
    "pause {job} --note incident",
    "resume {job}",
    "request {job}",
    "demo --headless --for 1",
]
VIEWING = [
    "config",
    "locks",
    "locks --json",
    "history",
    "history --json",
    "check",
    "check --json",
    "dupes {job}",
    "tui",
]


# Only this test's rows and sessions are compared (other tests share the databases' tables).
def pg_state(conn: Any, uid: str, pid: int) -> dict[str, Any]:
    tables = conn.execute(
        "select table_name from information_schema.tables where table_schema = current_schema()"
        " and (table_name like 'lockconsole%%' or table_name in ('shedlock', %s)) order by 1",
        (f"inv_{uid}",),
    ).fetchall()
    mine = f"%{uid}%"
    return {
        "tables": tables,
        "ledger": conn.execute(
            "select * from lockconsole_runs where job like %s order by id", (mine,)
        ).fetchall(),
        "audit": conn.execute(
            "select * from lockconsole_audit where target like %s or target like %s order by id",
            (mine, f"%{pid}%"),
        ).fetchall()
        if ("lockconsole_audit",) in tables
        else None,
        "leases": conn.execute("select * from shedlock where name like %s", (mine,)).fetchall(),
        "invoices": conn.execute(f"select * from inv_{uid} order by id").fetchall(),
        "locks": conn.execute(
            "select l.pid, classid, objid, objsubid, granted, a.backend_start from pg_locks l"
            " join pg_stat_activity a using (pid) where locktype = 'advisory' and l.pid = %s",
            (pid,),
        ).fetchall(),
    }


def my_state(conn: Any, uid: str, name: str) -> dict[str, Any]:
    with conn.cursor() as cur:
        cur.execute("show tables like 'lockconsole%%'")
        tables = sorted(r[0] for r in cur.fetchall())
        state: dict[str, Any] = {"tables": tables}
        cur.execute("select * from lockconsole_runs where job like %s order by id", (f"%{uid}%",))
        state["ledger"] = cur.fetchall()
        if "lockconsole_audit" in tables:
            cur.execute("select * from lockconsole_audit where target like %s", (f"%{uid}%",))
            state["audit"] = cur.fetchall()
        cur.execute("select is_used_lock(%s)", (name,))
        state["lock"] = cur.fetchone()[0]
    return state


def test_every_command_with_read_only_changes_nothing(
    pg_url, mysql_url, pg_conn, mysql_conn, uid, write_config, cli_env
) -> None:
    pg_job, my_job, lease_job = f"ro_pg_{uid}", f"ro_my_{uid}", f"ro_lease_{uid}"
    config = write_config(f"""
        [databases.pg]
        url = "{pg_url}"
        [databases.my]
        url = "{mysql_url}"
        [jobs.{pg_job}]
        database = "pg"
        strategy = "pg-session"
        schedule = "* * * * * *"
        command = ["true"]
        [jobs.{pg_job}.idempotency]
        table = "inv_{uid}"
        key = ["tenant_id"]
        [jobs.{my_job}]
        database = "my"
        strategy = "mysql"
        schedule = "* * * * * *"
        command = ["true"]
        [jobs.{lease_job}]
        database = "pg"
        strategy = "lease"
        command = ["true"]
        """)
    pg_conn.execute(f"create table inv_{uid} (id serial primary key, tenant_id int)")
    pg_conn.execute(f"insert into inv_{uid} (tenant_id) values (1), (1), (2)")
    try:
        # The ledgers (and the lease table) exist with rows before read-only commands run.
        for job in (pg_job, my_job, lease_job):
            done = run_cli(config, *["run", job], env=cli_env)
            assert done.returncode == 0, done.stderr
        holder = psycopg.connect(pg_url, autocommit=True)
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(pg_job),))
        pid = holder.info.backend_pid
        my_holder = mysql_connect(mysql_url)
        with my_holder.cursor() as cur:
            cur.execute("select get_lock(%s, 0)", (my_job,))
        try:
            before = (pg_state(pg_conn, uid, pid), my_state(mysql_conn, uid, my_job))
            assert before[0]["locks"] and before[1]["lock"], "the holders' locks are visible"
            assert len(before[0]["ledger"]) == 2 and len(before[1]["ledger"]) == 1
            for template in MUTATING + VIEWING:
                words = template.format(job=pg_job, pid=pid).split()
                for placed in (["--read-only", *words], [*words[:1], "--read-only", *words[1:]]):
                    done = run_cli(config, *placed, env=cli_env)
                    where = " ".join(placed)
                    if template in MUTATING:
                        assert done.returncode == 2, (where, done.stdout, done.stderr)
                        assert done.stderr.strip().splitlines() == [
                            f"lockconsole: {words[0]} refused: --read-only is set; nothing was done"
                        ], where
                        assert done.stdout == "", where
                    else:
                        assert "Traceback" not in done.stderr, (where, done.stderr)
                        assert "refused" not in done.stderr, (where, done.stderr)
                    after = (pg_state(pg_conn, uid, pid), my_state(mysql_conn, uid, my_job))
                    assert after == before, f"{where} changed a database"
            assert not holder.closed and holder.execute("select 1").fetchone() == (1,)
        finally:
            holder.close()
            my_holder.close()
    finally:
        pg_conn.execute(f"drop table if exists inv_{uid}")
