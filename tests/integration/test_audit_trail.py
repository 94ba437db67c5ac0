"""Who did what: triggers and force-releases are audited, `lockconsole audit` lists them, and a
manual run carries who asked into its ledger row, in a column an older ledger gains on first use.

Each test runs in a fresh database of its own (PostgreSQL, MariaDB/MySQL, SQLite) so that an
"older" ledger (without the `actor` column) or a broken audit table touches nothing else.
"""

from __future__ import annotations

import getpass
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockconsole.backends.ledger.store import TABLE, Ledger
from lockconsole.config.loader import load_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.model.jobs import Database

from tests.support.cli import run_cli

ACTOR = f"{getpass.getuser()}@{socket.gethostname()}"


@pytest.fixture
def fresh_pg(own_database: str) -> str:
    """A new PostgreSQL database of this test's own (conftest's own_database)."""
    return own_database


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def fresh_ledger(request: pytest.FixtureRequest, uid: str, tmp_path: Path) -> Iterator[str]:
    """A fresh database for a ledger: PostgreSQL, MariaDB/MySQL or a SQLite file."""
    if request.param == "postgresql":
        yield request.getfixturevalue("fresh_pg")
        return
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    import pymysql

    url = request.getfixturevalue("mysql_url")
    u = parse_url(url)
    name = f"audit_{uid}"
    conn = pymysql.connect(
        host=u.host, port=u.port or 3306, user=u.user, password=u.password or "", autocommit=True
    )
    conn.cursor().execute(f"create database {name}")
    try:
        yield url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        conn.cursor().execute(f"drop database {name}")
        conn.close()


def test_an_older_ledger_gains_the_actor_column_and_a_manual_run_names_who_asked(
    fresh_ledger: str, pg_url: str, uid: str, write_config, cli_env: dict[str, str]
) -> None:
    ledger_db = Database("ledger", parse_url(fresh_ledger))
    with Ledger(ledger_db) as ledger:
        ledger.create_schema()
        engine = ledger.sa_engine()
        with engine.begin() as conn:  # the ledger as the release before the column wrote it
            conn.exec_driver_sql(f"ALTER TABLE {TABLE} DROP COLUMN actor")
    job = f"nightly_{uid}"
    config = write_config(
        f"""
        [lockconsole]
        ledger_database = "ledger"
        [databases.main]
        url = "{pg_url}"
        [databases.ledger]
        url = "{fresh_ledger}"
        [jobs.{job}]
        database = "main"
        strategy = "pg-session"
        schedule = "0 2 * * *"
        """
    )
    scheduled = run_cli(config, "run", job, "--", sys.executable, "-c", "pass", env=cli_env)
    assert scheduled.returncode in (0, 3), scheduled.stderr  # ran, or the slot had run
    manual = run_cli(config, "run", "--manual", "--json", job, "--", "true", env=cli_env)
    assert manual.returncode == 0, manual.stderr
    assert json.loads(manual.stdout)["actor"] == ACTOR
    with Ledger(ledger_db) as ledger:
        runs = ledger.runs(job)
    by_trigger = {r.trigger: r for r in runs}
    assert by_trigger["manual"].actor == ACTOR and by_trigger["manual"].outcome == "succeeded"
    assert by_trigger["scheduled"].actor is None  # nobody asked: the schedule did

    listed = run_cli(config, "audit", "--json", "--job", job, "--since", "1h", env=cli_env)
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)["entries"]
    assert (entry["action"], entry["job"], entry["result"]) == ("trigger", job, "succeeded")
    assert f"{entry['os_user']}@{entry['host']}" == ACTOR
    assert entry["database"] == "ledger"
    assert entry["message"].startswith(f"run {by_trigger['manual'].id}")
    # its job's rows: the shared database holds other tests' newer entries (other workers)
    table = run_cli(config, "audit", "--job", job, env=cli_env)
    assert table.returncode == 0 and "trigger" in table.stdout and job in table.stdout


def test_audit_refuses_bad_input_in_one_line(
    pg_url: str, uid: str, write_config, cli_env: dict[str, str]
) -> None:
    config = write_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
    )
    for args in (["--since", "soon"], ["--job", "nobody"], ["--limit", "0"]):
        done = run_cli(config, "audit", *args, env=cli_env)
        assert done.returncode == 2, (args, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


def test_a_trigger_whose_audit_row_cannot_be_written_runs_nothing(
    fresh_pg: str, uid: str, tmp_path: Path, write_config, cli_env: dict[str, str]
) -> None:
    with psycopg.connect(fresh_pg, autocommit=True) as conn:  # not a table: inserts fail
        conn.execute("create view lockconsole_audit as select 1 as id")
    job = f"guarded_{uid}"
    marker = tmp_path / "ran"
    config = write_config(
        f'[databases.main]\nurl = "{fresh_pg}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        f'command = ["{sys.executable}", "-c", "open({str(marker)!r}, \\"w\\")"]\n'
    )
    done = run_cli(config, "run", "--manual", job, env=cli_env)
    assert done.returncode == 5, done.stderr  # a database error: nothing was done
    assert "audit log" in done.stderr and "nothing was done" in done.stderr
    assert not marker.exists()
    with Console(load_config(str(config))) as console:
        with pytest.raises(Exception, match="audit log"):
            console.trigger(job)
        assert not marker.exists()
        assert console.history(job) == []  # no attempt was even recorded


def test_console_trigger_and_release_are_audited_with_the_job(
    fresh_pg: str, uid: str, write_config
) -> None:
    job = f"steered_{uid}"
    config = load_config(
        str(
            write_config(
                f'[databases.main]\nurl = "{fresh_pg}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
                'command = ["true"]\n'
            )
        )
    )
    with Console(config) as console:
        run = console.trigger(job)
        assert (run.outcome, run.trigger, run.actor) == ("succeeded", "manual", ACTOR)
        holder_conn = psycopg.connect(fresh_pg, autocommit=True)
        try:
            holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
            [holder] = console.find_holders(job=job)
            assert console.release(holder).status == "released"
        finally:
            holder_conn.close()
        entries, errors = console.audit(job)
        assert errors == []
        assert [(e.action, e.job, e.result) for e in entries] == [
            ("release", job, "released"),
            ("trigger", job, "succeeded"),
        ]
        assert all(f"{e.os_user}@{e.host}" == ACTOR for e in entries)


def test_an_account_that_may_not_add_the_column_is_told_the_one_statement_its_owner_runs(
    fresh_pg: str, uid: str, write_config, cli_env: dict[str, str]
) -> None:
    """An older ledger and a least-privilege account (no ALTER): the run refuses in one line
    (exit 2) naming the ALTER its owner runs once; no lock stays held and no row is written."""
    ledger_db = Database("ledger", parse_url(fresh_pg))
    with Ledger(ledger_db) as ledger:
        ledger.create_schema()
        with ledger.sa_engine().begin() as conn:
            conn.exec_driver_sql(f"ALTER TABLE {TABLE} DROP COLUMN actor")
    role = f"runner_{uid}"
    with psycopg.connect(fresh_pg, autocommit=True) as admin:
        admin.execute(f"create role {role} login")
        admin.execute(f"grant select, insert, update on {TABLE} to {role}")
        admin.execute(f"grant usage on all sequences in schema public to {role}")
        admin.execute(f"grant select on all tables in schema public to {role}")
    try:
        url = fresh_pg.replace("postgres@", f"{role}@", 1)
        job = f"nightly_{uid}"
        config = write_config(
            f"""
            [databases.main]
            url = "{url}"
            [jobs.{job}]
            database = "main"
            strategy = "pg-session"
            """
        )
        done = run_cli(config, "run", job, "--", sys.executable, "-c", "pass", env=cli_env)
        assert done.returncode == 2, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "its owner must run once: ALTER TABLE" in lines[0] and "actor" in lines[0]
        with psycopg.connect(fresh_pg, autocommit=True) as admin:
            rows = admin.execute(f"select count(*) from {TABLE}").fetchone()
            held = admin.execute(  # in this database: another database's locks are not ours
                "select count(*) from pg_locks where locktype = 'advisory' and database = "
                "(select oid from pg_database where datname = current_database())"
            )
            assert rows == (0,) and held.fetchone() == (0,)
            # the owner adds it once, as told: the same account's run then records
            admin.execute(lines[0].split("its owner must run once: ", 1)[1].split(" (the ")[0])
        again = run_cli(config, "run", job, "--", sys.executable, "-c", "pass", env=cli_env)
        assert again.returncode == 0, again.stderr
    finally:
        with psycopg.connect(fresh_pg, autocommit=True) as admin:
            admin.execute(f"drop owned by {role}")
            admin.execute(f"drop role {role}")


def test_an_audit_table_from_before_the_job_column_gains_it_and_names_the_job(
    fresh_ledger: str, uid: str
) -> None:
    from lockconsole.backends.audit import TABLE as AUDIT
    from lockconsole.backends.audit import Actor, AuditLog

    database = Database("ledger", parse_url(fresh_ledger))
    log = AuditLog(database)
    try:
        log.table.create(log.engine)
        with log.engine.begin() as conn:  # the table as the release before the column made it
            conn.exec_driver_sql(f"ALTER TABLE {AUDIT} DROP COLUMN job")
    finally:
        log.close()
    job = f"nightly_{uid}"
    log = AuditLog(database, job=job)
    try:
        entry = log.begin(Actor.current(), "trigger", job)
        log.finish(entry, "succeeded")
        [row] = [e for e in log.entries() if e.id == entry]
    finally:
        log.close()
    assert (row.job, row.action, row.result) == (job, "trigger", "succeeded")
