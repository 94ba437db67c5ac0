"""The README's least-privilege tables, grant by grant, with PostgreSQL roles made and dropped
here: the ledger grants for running jobs (no CREATE needed), membership in the holder's role
for releasing, and the lease table's UPDATE grant for releasing a lease. Each grant is shown
doing its work, and its absence is shown failing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.backends.audit import AuditLog
from lockconsole.backends.factory import open_lock
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, parse_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.model.errors import LockconsoleError
from lockconsole.model.jobs import Database


@pytest.fixture
def roles(pg_url: str, pg_conn, uid: str) -> Iterator[Callable[..., str]]:  # type: ignore[no-untyped-def]
    """make(kind, *grants) -> the URL of a fresh login role `lc_<kind>_<uid>`; dropped after."""
    made: list[str] = []
    parts = urlsplit(pg_url)
    db = Database("main", parse_url(pg_url))
    AuditLog(db)._ensure()
    with Ledger(db) as ledger:
        ledger.create_schema()

    def make(kind: str, *grants: str, audit: bool = False) -> str:
        role = f"lc_{kind}_{uid}"
        pg_conn.execute(f"create role {role} login")
        made.append(role)
        for grant in grants:
            pg_conn.execute(grant.format(role=role))
        if audit:  # what every releasing account needs: the audit row is written first
            pg_conn.execute(f"grant select, insert, update on lockconsole_audit to {role}")
            pg_conn.execute(f"grant usage on sequence lockconsole_audit_id_seq to {role}")
        host = f"{parts.hostname}:{parts.port or 5432}"
        return urlunsplit(parts._replace(netloc=f"{role}@{host}"))

    yield make
    for role in reversed(made):
        pg_conn.execute(f"drop owned by {role}")
        pg_conn.execute(f"drop role if exists {role}")


def config_of(url: str, job: str, extra: str = "") -> Config:
    return parse_config(f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\n{extra}', "<test>")


def alive(pg_conn, pid: int) -> bool:  # type: ignore[no-untyped-def]
    return bool(pg_conn.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone())


def test_ledger_grants_let_a_runner_record_without_create(roles, pg_conn, uid) -> None:  # type: ignore[no-untyped-def]
    ledger = (
        "grant select, insert, update on lockconsole_runs to {role}",
        "grant usage on sequence lockconsole_runs_id_seq to {role}",
        "grant select on lockconsole_controls to {role}",  # is the job paused?
        "grant insert on lockconsole_run_output to {role}",  # what the job printed
    )
    runner = roles("runner", *ledger)
    reader = roles("reader", "grant select on lockconsole_runs to {role}")
    assert not pg_conn.execute(
        "select has_schema_privilege(%s, current_schema(), 'CREATE')", (f"lc_runner_{uid}",)
    ).fetchone()[0], "the runner cannot create tables: the ledger grants are all it has"
    job = f"grant_run_{uid}"
    with run_once(job, config=config_of(runner, job)) as run:
        assert run.acquired
    with (
        pytest.raises(LockconsoleError) as failed,
        run_once(f"{job}_2", config=config_of(reader, f"{job}_2")),
    ):
        pass
    assert "permission denied" in str(failed.value)
    assert "GRANT SELECT ON lockconsole_controls" in str(failed.value)
    rows = pg_conn.execute(
        "select job, outcome from lockconsole_runs where job like %s order by id", (f"{job}%",)
    ).fetchall()
    assert rows == [(job, "succeeded")], "the reader recorded nothing"


def test_membership_in_the_holders_role_releases_that_roles_sessions_only(
    roles, pg_conn, uid
) -> None:  # type: ignore[no-untyped-def]
    holder_url = roles("holder")
    other_url = roles("other")
    member_url = roles(
        "member",
        f"grant lc_holder_{uid} to {{role}}",
        "grant select on lockconsole_runs to {role}",
        audit=True,
    )
    job, other_job = f"g_{uid}", f"g_other_{uid}"
    holder = psycopg.connect(holder_url, autocommit=True)
    other = psycopg.connect(other_url, autocommit=True)
    text = f'[databases.main]\nurl = "{member_url}"\n[jobs.{job}]\n[jobs.{other_job}]\n'
    config = parse_config(text, "<test>")
    try:
        holder.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        other.execute("select pg_advisory_lock(%s)", (config.job(other_job).key.value,))
        with Console(config) as console:
            held = {h.job: h for h in console.snapshot().holders if h.granted}
            assert held[job].backend_start is not None, "a member sees its role's sessions"
            refused = console.release(held[other_job])
            assert refused.status == "denied", refused
            assert alive(pg_conn, other.info.backend_pid)
            done = console.release(held[job])
            assert done.status == "released", done
        assert not alive(pg_conn, holder.info.backend_pid)
    finally:
        holder.close()
        other.close()


def test_the_lease_update_grant_is_what_releasing_a_lease_needs(
    roles, pg_url, pg_conn, uid
) -> None:  # type: ignore[no-untyped-def]
    table, job = f"shedlock_{uid}", f"lease_{uid}"
    extra = f'strategy = "lease"\nlease_table = "{table}"\nmax_duration = "10m"\n'
    owner = config_of(pg_url, job, extra)
    lease = open_lock(
        owner.job(job), owner.databases["main"], instance="web-1", application_name="t"
    )
    assert lease.acquire()
    try:
        viewer = roles(
            "lviewer",
            f"grant select on {table} to {{role}}",
            "grant select on lockconsole_runs to {role}",
            audit=True,
        )
        releaser = roles(
            "lreleaser",
            f"grant select, update on {table} to {{role}}",
            "grant select on lockconsole_runs to {role}",
            audit=True,
        )
        with Console(config_of(viewer, job, extra)) as console:
            (h,) = [h for h in console.snapshot().holders if h.job == job]
            result = console.release(h)
            assert result.status == "error" and "permission denied" in result.message, result
        assert lease.still_held()
        with Console(config_of(releaser, job, extra)) as console:
            (h,) = [h for h in console.snapshot().holders if h.job == job]
            result = console.release(h)
            assert result.status == "released", result
        expired = pg_conn.execute(
            f"select lock_until <= now() from {table} where name = %s", (job,)
        ).fetchone()
        assert expired == (True,)
    finally:
        lease.release()
        lease.close()
