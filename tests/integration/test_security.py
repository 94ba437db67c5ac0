"""Security: read-only mode mutates nothing (CLI and Console); passwords never reach screen,
logs, JSON or errors; a release whose audit row cannot be written is not performed."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console, ReadOnlyError

from tests.support.cli import run_cli
from tests.support.config import config_toml


def count(conn: Any, table: str, where: str = "true") -> int:
    exists = conn.execute("select to_regclass(%s)", (table,)).fetchone()[0]
    return (
        conn.execute(f"select count(*) from {table} where {where}").fetchone()[0] if exists else 0
    )


def alive(conn: Any, pid: int) -> bool:
    return bool(conn.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone())


# -- read-only --------------------------------------------------------------------------------


@pytest.fixture
def held(pg_url, pg_conn, uid, write_config):
    """A job whose lock is held by another session (a plain psycopg connection)."""
    key = int(uid[:7], 16)
    config = write_config(
        config_toml(
            databases={"main": pg_url}, jobs={f"j_{uid}": {"key": key, "command": ["true"]}}
        )
    )
    holder = psycopg.connect(pg_url, autocommit=True)
    assert holder.execute("select pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
    pid = holder.info.backend_pid
    yield config, f"j_{uid}", pid
    holder.close()


def test_read_only_cli_release_does_nothing(held, pg_conn, cli_env) -> None:
    config, job, pid = held
    # this job's rows and this session's: other tests (other workers) write these tables too
    ours = f"job = '{job}' or target like '%{pid}%'"
    audit_before = count(pg_conn, "lockconsole_audit", ours)
    runs_before = count(pg_conn, "lockconsole_runs", f"job = '{job}'")
    for args in (
        ["--read-only", "release", "--job", job, "--yes"],
        ["--read-only", "release", "--pid", str(pid), "--yes"],
        ["--read-only", "release", "--pid", str(pid), "--yes", "--json"],
    ):
        done = run_cli(config, *args, env=cli_env)
        assert done.returncode == 2 and "read-only" in done.stderr, done.stderr
        assert len(done.stderr.splitlines()) == 1 and done.stdout == ""
    assert alive(pg_conn, pid)
    assert count(pg_conn, "lockconsole_audit", ours) == audit_before
    assert count(pg_conn, "lockconsole_runs", f"job = '{job}'") == runs_before


def test_read_only_console_refuses_every_mutation(held, pg_conn) -> None:
    """The facade itself refuses, whoever calls it (not only the CLI and the TUI): release,
    trigger, pause, resume and request change nothing, not even the audit."""
    config, job, pid = held
    audit_before = count(pg_conn, "lockconsole_audit", f"job = '{job}'")
    runs_before = count(pg_conn, "lockconsole_runs", f"job = '{job}'")
    tables = ("lockconsole_controls", "lockconsole_requests")
    present = {
        t for (t,) in pg_conn.execute("select tablename from pg_tables").fetchall() if t in tables
    }
    before = {t: count(pg_conn, t) for t in present}
    with Console(load_config(str(config)), read_only=True) as console:
        (holder,) = [h for h in console.snapshot().holders if h.job == job]
        with pytest.raises(ReadOnlyError):
            console.release(holder)
        with pytest.raises(ReadOnlyError):
            console.trigger(job)
        with pytest.raises(ReadOnlyError):
            console.pause(job, "read-only must refuse this")
        with pytest.raises(ReadOnlyError):
            console.resume(job)
        with pytest.raises(ReadOnlyError):
            console.request(job)
    assert alive(pg_conn, pid)
    assert count(pg_conn, "lockconsole_audit", f"job = '{job}'") == audit_before
    assert count(pg_conn, "lockconsole_runs", f"job = '{job}'") == runs_before
    now = {
        t for (t,) in pg_conn.execute("select tablename from pg_tables").fetchall() if t in tables
    }
    assert now == present and {t: count(pg_conn, t) for t in present} == before


@pytest.mark.mysql
def test_read_only_mysql_and_lease(
    mysql_url, mysql_conn, pg_url, pg_conn, uid, write_config
) -> None:
    """KILL and lease updates are refused too: a GET_LOCK holder and a lease row survive."""
    config = load_config(
        str(
            write_config(
                config_toml(
                    databases={"my": mysql_url, "pg": pg_url},
                    jobs={
                        f"m_{uid}": {"database": "my", "strategy": "mysql"},
                        f"l_{uid}": {
                            "database": "pg",
                            "strategy": "lease",
                            "lease_table": f"shedlock_{uid}",
                            "max_duration": "5m",
                        },
                    },
                )
            )
        )
    )
    from lockconsole.backends.factory import open_lock

    with mysql_conn.cursor() as cur:
        cur.execute("select get_lock(%s, 0), connection_id()", (f"m_{uid}",))
        got, conn_id = cur.fetchone()
    assert got == 1
    lease = open_lock(
        config.job(f"l_{uid}"), config.databases["pg"], instance="web-1", application_name="t"
    )
    assert lease.acquire()
    try:
        row_before = pg_conn.execute(f"select * from shedlock_{uid}").fetchall()
        with Console(config, read_only=True) as console:
            holders = [h for h in console.snapshot().holders if h.job in (f"m_{uid}", f"l_{uid}")]
            assert {h.job for h in holders} == {f"m_{uid}", f"l_{uid}"}
            for h in holders:
                with pytest.raises(ReadOnlyError):
                    console.release(h)
        with mysql_conn.cursor() as cur:
            cur.execute("select is_used_lock(%s)", (f"m_{uid}",))
            assert cur.fetchone()[0] == conn_id
        assert pg_conn.execute(f"select * from shedlock_{uid}").fetchall() == row_before
        assert lease.still_held()
    finally:
        lease.release()
        lease.close()
        pg_conn.execute(f"drop table shedlock_{uid}")


# -- passwords never shown --------------------------------------------------------------------


def _scan(secret: str, *outputs: str) -> None:
    for text in outputs:
        assert secret not in text, text[:500]


def test_pg_password_never_shown(pg_url, uid, write_config, cli_env) -> None:
    """PostgreSQL here trusts every local login, so a password in the URL is accepted and
    carried everywhere; it must never be printed - also on error paths."""
    secret = f"S3cret-{uid}"
    parts = urlsplit(pg_url)
    with_pw = urlunsplit(
        parts._replace(netloc=f"postgres:{secret}@{parts.hostname}:{parts.port or 5432}")
    )
    dead = urlunsplit(parts._replace(netloc=f"postgres:{secret}@127.0.0.1:1"))
    idempotency = {"table": f"no_such_table_{uid}", "key": ["tenant_id"]}
    good = write_config(
        config_toml(
            databases={"main": with_pw},
            jobs={
                f"j_{uid}": {
                    "schedule": "0 2 * * *",
                    "command": ["true"],
                    "idempotency": idempotency,
                }
            },
        ),
        "good.toml",
    )
    bad = write_config(
        config_toml(databases={"main": dead}, jobs={f"j_{uid}": {"command": ["true"]}}),
        "bad.toml",
    )
    outputs = []
    for config in (good, bad):
        for args in (
            ["config", "--json"],
            ["config"],
            ["locks"],
            ["locks", "--json"],
            ["check", "--json"],
            ["check"],
            ["history", "--json"],
            ["run", f"j_{uid}", "--json"],
            ["run", f"j_{uid}", "--", "false"],
            ["dupes", f"j_{uid}"],
            ["release", "--pid", "1", "--yes"],
        ):
            done = run_cli(config, *args, env=cli_env)
            outputs += [done.stdout, done.stderr]
            assert "Traceback" not in done.stderr, (args, done.stderr)
    _scan(secret, *outputs)
    assert any("postgres:***@" in o for o in outputs), "URLs are shown masked"


@pytest.fixture
def mysql_user(mysql_conn, uid):
    user, password = f"lc_sec_{uid}", f"Pw-{uid}-secret"
    with mysql_conn.cursor() as cur:
        cur.execute(f"create user '{user}'@'%' identified by '{password}'")
        cur.execute(f"create user '{user}'@'localhost' identified by '{password}'")
        cur.execute(f"grant select on test.* to '{user}'@'%'")
        cur.execute(f"grant select on test.* to '{user}'@'localhost'")
    yield user, password
    with mysql_conn.cursor() as cur:
        cur.execute(f"drop user if exists '{user}'@'%'")
        cur.execute(f"drop user if exists '{user}'@'localhost'")


@pytest.mark.mysql
def test_mysql_password_never_shown(mysql_url, mysql_user, uid, write_config, cli_env) -> None:
    user, password = mysql_user
    host = urlsplit(mysql_url)
    outputs = []
    for pw in (password, "Wrong-" + password):
        url = f"mysql://{user}:{pw}@{host.hostname}:{host.port or 3306}/test"
        config = write_config(
            config_toml(
                databases={"main": url},
                jobs={f"m_{uid}": {"strategy": "mysql", "command": ["true"]}},
            ),
            f"m{len(pw)}.toml",
        )
        for args in (
            ["config", "--json"],
            ["locks"],
            ["locks", "--json"],
            ["check", "--json"],
            ["history"],
            ["run", f"m_{uid}", "--json"],
            ["release", "--pid", "1", "--yes"],
        ):
            done = run_cli(config, *args, env=cli_env)
            assert "Traceback" not in done.stderr, (args, done.stderr)
            outputs += [done.stdout, done.stderr]
        _scan(pw, *outputs)
    _scan(password, *outputs)
    assert any("Access denied" in o for o in outputs), "the bad password was tried"


# -- the audit table cannot be skipped --------------------------------------------------------


def test_release_without_audit_is_not_performed(
    pg_url, pg_conn, uid, write_config, cli_env
) -> None:
    """An operator account that may terminate backends but cannot write lockconsole_audit:
    `lockconsole release --yes` ends nothing and says why."""
    from lockconsole.backends.audit import AuditLog
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database

    AuditLog(Database("main", parse_url(pg_url))).ensure()  # exists, owned by the superuser
    operator, holder_role = f"lc_noaudit_{uid}", f"lc_holder_{uid}"
    pg_conn.execute(f"create role {holder_role} login")
    pg_conn.execute(f"create role {operator} login in role pg_signal_backend, pg_read_all_stats")
    parts = urlsplit(pg_url)

    def as_role(role: str) -> str:
        return urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port or 5432}"))

    key = int(uid[:7], 16)
    holder = psycopg.connect(as_role(holder_role), autocommit=True)
    try:
        assert holder.execute("select pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
        config = write_config(
            config_toml(databases={"main": as_role(operator)}, jobs={f"j_{uid}": {"key": key}})
        )
        audit_before = count(pg_conn, "lockconsole_audit", f"job = 'j_{uid}'")
        done = run_cli(config, "release", "--job", f"j_{uid}", "--yes", env=cli_env)
        assert done.returncode != 0, done.stdout
        assert "audit log" in done.stderr and "nothing was done" in done.stderr, done.stderr
        assert "Traceback" not in done.stderr and len(done.stderr.splitlines()) == 1
        # a terminate would have been issued (and waited for) before the command exited
        assert alive(pg_conn, holder.info.backend_pid), "the holder survived"
        assert count(pg_conn, "lockconsole_audit", f"job = 'j_{uid}'") == audit_before
    finally:
        holder.close()
        pg_conn.execute(f"drop role if exists {operator}")
        pg_conn.execute(f"drop role if exists {holder_role}")
