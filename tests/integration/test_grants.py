"""The README's least-privilege tables, grant by grant, with PostgreSQL roles made and dropped
here: the ledger grants for running jobs (no CREATE needed) and for serving run requests, a
viewer that reads runs and output but cannot pause or ask, a steerer that can, membership in the
holder's role for releasing, and the lease table's UPDATE grant for releasing a lease. Each
grant is shown doing its work, and its absence is shown failing."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.backends.audit import AuditLog
from lockconsole.backends.factory import open_lock
from lockconsole.backends.ledger import requests
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, parse_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.model.errors import LockconsoleError
from lockconsole.model.jobs import Database
from lockconsole.model.slots import utcnow
from lockconsole.serving import RequestServer

from tests.support.helpers import DEADLINE, wait_for


@pytest.fixture
def roles(pg_url: str, pg_conn, uid: str) -> Iterator[Callable[..., str]]:
    """make(kind, *grants) -> the URL of a fresh login role `lc_<kind>_<uid>`; dropped after."""
    made: list[str] = []
    parts = urlsplit(pg_url)
    db = Database("main", parse_url(pg_url))
    AuditLog(db).ensure()
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
    for role in reversed(made):  # its sessions first (a request server's, a kept ledger's)
        pg_conn.execute(
            "select pg_terminate_backend(pid) from pg_stat_activity where usename = %s", (role,)
        )
        pg_conn.execute(f"drop owned by {role}")
        pg_conn.execute(f"drop role if exists {role}")


def config_of(url: str, job: str, extra: str = "") -> Config:
    return parse_config(f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\n{extra}', "<test>")


def alive(pg_conn, pid: int) -> bool:
    return bool(pg_conn.execute("select 1 from pg_stat_activity where pid = %s", (pid,)).fetchone())


# What each use needs of the ledger's tables (the README's "Least privilege" tables).
RUNNER = (
    "grant select, insert, update on lockconsole_runs to {role}",
    "grant usage on sequence lockconsole_runs_id_seq to {role}",
    "grant select on lockconsole_controls to {role}",  # is the job paused?
    "grant insert on lockconsole_run_output to {role}",  # what the job printed
)
SERVER = (*RUNNER, "grant select, update on lockconsole_requests to {role}")  # take, record
VIEWER = (
    "grant select on lockconsole_runs, lockconsole_controls, lockconsole_run_output to {role}",
)
STEERER = (
    *VIEWER,
    "grant insert, delete on lockconsole_controls to {role}",  # pause, resume
    "grant select, insert, update on lockconsole_requests to {role}",  # ask, follow, expire
    "grant usage on sequence lockconsole_requests_id_seq to {role}",
)


def test_ledger_grants_let_a_runner_record_without_create(roles, pg_conn, uid) -> None:
    runner = roles("runner", *RUNNER)
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
) -> None:
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
) -> None:
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


def _queue(pg_url: str, job: str) -> int:
    """A run request for `job`, queued by the test's own (privileged) account."""
    now = utcnow()
    with Ledger(Database("main", parse_url(pg_url))) as ledger:
        return requests.submit(
            ledger,
            job,
            slot=None,
            instance=None,
            forced=False,
            requested_by="test",
            now=now,
            expires_at=now + timedelta(minutes=10),
        )


def _request(pg_url: str, request_id: int) -> requests.Request | None:
    with Ledger(Database("main", parse_url(pg_url))) as ledger:
        return requests.get(ledger, request_id)


def test_a_runner_serves_requests_with_select_and_update_on_lockconsole_requests(
    roles, pg_url, uid
) -> None:
    job = f"grant_serve_{uid}"
    asked = _queue(pg_url, job)
    runner = roles("runner", *RUNNER)
    config = config_of(runner, job)
    refused = RequestServer(config, [config.job(job)], instance="web-1", targets={job: print})
    try:
        with pytest.raises(LockconsoleError) as denied:
            refused.serve_once(config.ledger_for(config.job(job)))
    finally:
        refused.stop()
    assert "permission denied" in str(denied.value)
    assert "GRANT UPDATE ON lockconsole_requests" in str(denied.value)
    assert _request(pg_url, asked).state == "queued"

    ran = threading.Event()
    config = config_of(roles("server", *SERVER), job)
    server = RequestServer(config, [config.job(job)], instance="web-1", targets={job: ran.set})
    server.start()
    try:
        assert ran.wait(DEADLINE), "the request was served"

        def final() -> requests.Request | None:
            found = _request(pg_url, asked)
            return found if found is not None and found.final else None

        done = wait_for(final, what="the request's outcome")
    finally:
        server.stop()
    assert (done.state, done.served_by) == ("succeeded", "web-1")


def test_a_viewer_reads_but_cannot_pause_or_ask_and_a_steerer_can(roles, pg_url, uid) -> None:
    job = f"grant_steer_{uid}"
    with (
        pytest.raises(ValueError),
        run_once(job, config=config_of(pg_url, job), reuse_connections=False),
    ):
        raise ValueError("an output to read")
    viewer = roles("viewer", *VIEWER, audit=True)
    with Console(config_of(viewer, job)) as console:
        (run,) = [r for r in console.snapshot().runs if r.job == job]
        assert run.id is not None and run.outcome == "failed"
        found = console.run_output(run.id)
        assert found is not None and "ValueError: an output to read" in str(found.output)
        with pytest.raises(LockconsoleError) as paused:
            console.pause(job, "incident 7")
        assert "permission denied" in str(paused.value)
        with pytest.raises(LockconsoleError) as asked:
            console.request(job)
        assert "permission denied" in str(asked.value)
        assert "lockconsole_requests" in str(asked.value)
    steerer = roles("steerer", *STEERER, audit=True)
    with Console(config_of(steerer, job)) as console:
        pause = console.pause(job, "incident 7")
        assert pause.note == "incident 7"
        request_id = console.request(job, timeout=timedelta(minutes=10))
        found_request = console.request_state(job, request_id)
        assert found_request is not None and found_request.state == "queued"
        assert console.resume(job) is not None
