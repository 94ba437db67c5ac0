"""Least privilege (README, "Least privilege"), tested with accounts the tests create and drop:
a viewer sees holders with details and cannot release; a releaser can release; a plain
account sees the holder with hidden details and a note saying which privilege would help."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console

PG_GRANTS = {
    "viewer": "in role pg_monitor",  # pg_monitor includes pg_read_all_stats
    "releaser": "in role pg_signal_backend, pg_read_all_stats",
    "plain": "",
}


def _pg_console(url: str, job: str, key: int) -> Console:
    text = f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nkey = {key}\n'
    return Console(parse_config(text, "<test>"))


@pytest.fixture
def pg_accounts(pg_url, pg_conn, uid):
    from lockconsole.backends.audit import AuditLog
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database

    db = Database("main", parse_url(pg_url))
    AuditLog(db).ensure()
    with Ledger(db) as ledger:
        ledger.create_schema()
    parts = urlsplit(pg_url)
    roles = {kind: f"lc_{kind}_{uid}" for kind in (*PG_GRANTS, "holder")}
    pg_conn.execute(f"create role {roles['holder']} login")
    for kind, grant in PG_GRANTS.items():
        pg_conn.execute(f"create role {roles[kind]} login {grant}")
        pg_conn.execute(f"grant select, insert, update on lockconsole_audit to {roles[kind]}")
        pg_conn.execute(f"grant usage on sequence lockconsole_audit_id_seq to {roles[kind]}")
        pg_conn.execute(f"grant select on lockconsole_runs to {roles[kind]}")

    def url(kind: str) -> str:
        return urlunsplit(
            parts._replace(netloc=f"{roles[kind]}@{parts.hostname}:{parts.port or 5432}")
        )

    yield url
    for role in roles.values():
        pg_conn.execute(f"revoke all on lockconsole_audit, lockconsole_runs from {role}")
        pg_conn.execute(f"revoke all on sequence lockconsole_audit_id_seq from {role}")
        pg_conn.execute(f"drop role if exists {role}")


def test_pg_viewer_releaser_plain(pg_accounts, pg_conn, uid) -> None:
    job, key = f"j_{uid}", int(uid[:7], 16)
    holder = psycopg.connect(pg_accounts("holder"), autocommit=True, application_name="billing")
    try:
        assert holder.execute("select pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
        pid = holder.info.backend_pid

        with _pg_console(pg_accounts("plain"), job, key) as plain:
            snap = plain.snapshot()
            (h,) = [h for h in snap.holders if h.job == job]
            assert h.pid == pid and h.state is None and h.backend_start is None and h.hidden
            assert "pg_read_all_stats" in h.hidden
            result = plain.release(h)
            assert result.status == "denied", result
            assert "pg_signal_backend" in result.message, result.message

        with _pg_console(pg_accounts("viewer"), job, key) as viewer:
            (h,) = [h for h in viewer.snapshot().holders if h.job == job]
            assert (h.pid, h.application_name, h.hidden) == (pid, "billing", None)
            assert h.backend_start is not None and h.state == "idle"
            result = viewer.release(h)
            assert result.status == "denied" and "pg_signal_backend" in result.message, result
        assert pg_conn.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone()

        with _pg_console(pg_accounts("releaser"), job, key) as releaser:
            (h,) = [h for h in releaser.snapshot().holders if h.job == job]
            assert h.backend_start is not None, "pg_read_all_stats: the backend_start guard works"
            result = releaser.release(h)
            assert result.status == "released", result.message
        assert not pg_conn.execute(
            "select 1 from pg_stat_activity where pid = %s", (pid,)
        ).fetchone()
    finally:
        holder.close()


MY_GRANTS = {
    "viewer": ["PROCESS"],
    "releaser": ["PROCESS", "CONNECTION ADMIN"],
    "plain": [],
}


@pytest.fixture
def my_accounts(mysql_url, mysql_conn, uid):
    host = urlsplit(mysql_url)
    users = {kind: f"lc_{kind[0]}_{uid}" for kind in (*MY_GRANTS, "holder")}
    with mysql_conn.cursor() as cur:
        for kind, user in users.items():
            for h in ("%", "localhost"):
                cur.execute(f"create user '{user}'@'{h}'")
                cur.execute(f"grant select, insert, update, create on test.* to '{user}'@'{h}'")
                for priv in MY_GRANTS.get(kind, []):
                    cur.execute(f"grant {priv} on *.* to '{user}'@'{h}'")

    def url(kind: str) -> str:
        return f"mysql://{users[kind]}@{host.hostname}:{host.port or 3306}/test"

    yield url
    with mysql_conn.cursor() as cur:
        for user in users.values():
            for h in ("%", "localhost"):
                cur.execute(f"drop user if exists '{user}'@'{h}'")


@pytest.mark.mysql
def test_mysql_viewer_releaser_plain(my_accounts, mysql_conn, uid) -> None:
    import pymysql

    job = f"m_{uid}"
    u = urlsplit(my_accounts("holder"))
    holder = pymysql.connect(
        host=u.hostname, port=u.port, user=u.username, database="test", autocommit=True
    )

    def console(kind: str) -> Console:
        text = f'[databases.main]\nurl = "{my_accounts(kind)}"\n[jobs.{job}]\nstrategy = "mysql"\n'
        return Console(parse_config(text, "<test>"))

    def used() -> object:
        with mysql_conn.cursor() as cur:
            cur.execute("select is_used_lock(%s)", (job,))
            return cur.fetchone()[0]

    try:
        with holder.cursor() as cur:
            cur.execute("select get_lock(%s, 0), connection_id()", (job,))
            row = cur.fetchone()
            assert row is not None
            got, conn_id = row
        assert got == 1
        with console("plain") as plain:
            snap = plain.snapshot()
            (h,) = [h for h in snap.holders if h.job == job]
            assert h.pid == conn_id and (h.hidden or snap.notes), (h, snap.notes)
        with console("viewer") as viewer:
            (h,) = [h for h in viewer.snapshot().holders if h.job == job]
            assert h.user == u.username and h.hidden is None
            result = viewer.release(h)
            assert result.status == "denied", result
            assert "CONNECTION ADMIN" in result.message or "CONNECTION_ADMIN" in result.message
        assert used() == conn_id
        with console("releaser") as releaser:
            (h,) = [h for h in releaser.snapshot().holders if h.job == job]
            result = releaser.release(h)
            assert result.status == "released", result.message
        assert used() is None
    finally:
        holder.close()
