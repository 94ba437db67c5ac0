"""The run path's round trips on PostgreSQL (backends/postgres/merged.py), counted on the wire.

A counting TCP proxy sits between lockconsole and the server and counts each burst the client
sends after the server last spoke: a pipeline of two statements is one. Kept connections
(run_once's sessions), so connecting is not counted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlsplit

import pytest

from lockconsole import run_once
from lockconsole.config.loader import parse_config
from lockconsole.engine.sessions import REGISTRY

from tests.support.tcp_proxy import CountingProxy, proxied
from tests.support.tcp_proxy import turns as _turns

pytestmark = pytest.mark.usefixtures("empty_registry")
SLOT = datetime(2030, 1, 1, 3, tzinfo=UTC)


@pytest.fixture
def proxy(pg_url):
    counting, url = proxied(pg_url, 5432, CountingProxy)
    yield counting, url
    REGISTRY.close_all()
    counting.close()


def _config(url: str, job: str, strategy: str = "pg-session", extra: str = ""):
    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        f'schedule = "0 3 * * *"\nallow_pooler = true\nlease_table = "lease_{job}"\n{extra}'
    )


ROUND_TRIPS = [("pg-session", 2), ("pg-xact", 3), ("mysql", 2), ("lease", 2)]


@pytest.mark.parametrize(("strategy", "turns"), ROUND_TRIPS)
def test_round_trips_of_an_attempt(request, uid, strategy, turns):
    """pg-session, mysql and a lease on PostgreSQL: decide, finish. pg-xact: try-lock,
    decide_run on the ledger's connection, then outcome + COMMIT."""
    counting, url = request.getfixturevalue("mysql_proxy" if strategy == "mysql" else "proxy")
    config = _config(url, f"rt_{uid}", strategy)

    def attempt(hour: int) -> str:
        slot = SLOT.replace(hour=hour)  # a slot each: every attempt checks its claim and runs
        with run_once(f"rt_{uid}", config=config, instance="web-1", slot=slot) as run:
            assert run.acquired, run.run.message
        return run.run.outcome

    attempt(0)  # connects, and its first try passes the pooler guard
    for hour in (1, 2, 3):
        assert _turns(counting, lambda: attempt(hour)) == (turns, "succeeded")  # noqa: B023


# a paused attempt: decide_run reads the pause and lets the lock go, then the runner writes the
# paused row in the pause's words; pg-xact lets its transaction go (ROLLBACK), a lease its row
PAUSED_ROUND_TRIPS = [("pg-session", 2), ("pg-xact", 4), ("mysql", 2), ("lease", 3)]


@pytest.mark.parametrize(("strategy", "turns"), PAUSED_ROUND_TRIPS)
def test_a_paused_job_is_recorded_from_the_decide_round_trip_and_the_lock_is_let_go(
    request, uid, strategy, turns
):
    from lockconsole.backends.ledger.pauses import Pauses
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.engine.runner import EXIT_SKIPPED, exit_code_for
    from lockconsole.model.jobs import Pause

    counting, url = request.getfixturevalue("mysql_proxy" if strategy == "mysql" else "proxy")
    job = f"rt_{uid}"
    config = _config(url, job, strategy)

    def attempt(instance: str, hour: int):
        with run_once(job, config=config, instance=instance, slot=SLOT.replace(hour=hour)) as run:
            pass
        return run.run

    assert attempt("web-1", 0).outcome == "succeeded"  # connects; the ledger's tables exist
    now = datetime.now(UTC)
    pause = Pause(
        job,
        "incident 42: invoices doubled",
        "ops@console",
        now.replace(microsecond=123456) - timedelta(minutes=1),
        now.replace(microsecond=654321) + timedelta(hours=1),
    )
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        Pauses(ledger).pause(pause)
        attempt("web-1", 1)  # may connect the ledger's own connection (run_once keeps it)
        turned, run = _turns(counting, lambda: attempt("web-1", 2))
        assert (turned, run.outcome, run.message) == (turns, "paused", pause.reason())
        assert (run.session_id, run.fencing_token, exit_code_for(run)) == (None, None, EXIT_SKIPPED)
        [stored] = [r for r in ledger.runs(job) if r.id == run.id]
        assert (stored.outcome, stored.message) == ("paused", pause.reason())
        assert stored.finished_at is not None
        Pauses(ledger).resume(job, datetime.now(UTC))
    # web-1's session is kept (REGISTRY): a hold it kept would make web-2's attempt a skip
    assert len(REGISTRY) >= 1
    assert attempt("web-2", 3).outcome == "succeeded"


def test_a_claimed_slot_is_skipped_in_one_round_trip_and_lets_the_lock_go(proxy, pg_conn, uid):
    counting, url = proxy
    job = f"rt_{uid}"
    config = _config(url, job)

    def attempt(instance: str, slot: datetime = SLOT):
        with run_once(job, config=config, instance=instance, slot=slot) as run:
            pass
        return run

    attempt("web-1")
    attempt("web-2", SLOT.replace(hour=4))  # connects; a slot of its own
    turns, run = _turns(counting, lambda: attempt("web-2"))
    assert turns == 1
    assert run.run.outcome == "skipped" and "slot already ran on web-1" in run.run.message
    assert len(REGISTRY) == 2  # both sessions kept: neither holds the lock
    held = pg_conn.execute(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
        "WHERE l.locktype = 'advisory' AND a.application_name LIKE %s",
        (f"lockconsole:{job}@%",),
    ).fetchone()[0]
    assert held == 0


def test_a_lock_held_elsewhere_is_a_skip_in_one_round_trip(proxy, pg_conn, uid):
    counting, url = proxy
    job = f"rt_{uid}"
    config = _config(url, job)
    with run_once(job, config=config, instance="web-1", slot=SLOT) as first:
        assert first.acquired

        def second():
            with run_once(job, config=config, instance="web-2", slot=SLOT) as run:
                return run.run

        second()  # its connection's first try
        turns, run = _turns(counting, second)
    assert turns == 1
    assert run.outcome == "skipped" and run.message == "lock held by another session"


def test_an_attempt_left_acquired_is_closed_before_the_slot_runs_again(pg_url, pg_conn, uid):
    job = f"rt_{uid}"
    config = _config(pg_url, job)
    with run_once(job, config=config, instance="web-1", slot=SLOT) as first:
        assert first.acquired
        abandoned = first.run.id
        # the holder's process dies here: its row stays "acquired", its session lock goes
        first.lock.close()
        with run_once(job, config=config, instance="web-2", slot=SLOT) as second:
            assert second.acquired, second.run.message
    rows = dict(
        pg_conn.execute(
            "SELECT instance, outcome FROM lockconsole_runs WHERE job = %s", (job,)
        ).fetchall()
    )
    assert rows == {"web-1": "lock_lost", "web-2": "succeeded"}, (rows, abandoned)


def test_a_database_without_the_ledger_table_gets_it_on_the_first_attempt(pg_url, uid):
    import psycopg

    name = f"h_rounds_{uid}"
    parts = urlsplit(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # a constant prefix and a hex suffix
    try:
        fresh = pg_url.replace(parts.path, "/" + name)
        with run_once(f"rt_{uid}", config=_config(fresh, f"rt_{uid}"), slot=SLOT) as run:
            assert run.acquired, run.run.message
            # the attempt went on one statement at a time; its row still names the session
            # that holds the lock (what `check` and the fault tests look it up by)
            with psycopg.connect(fresh, autocommit=True) as conn:
                holders = conn.execute(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                    "AND database = (SELECT oid FROM pg_database WHERE datname = %s)",
                    (name,),
                ).fetchall()
                recorded = conn.execute(
                    "SELECT session_id FROM lockconsole_runs WHERE job = %s", (f"rt_{uid}",)
                ).fetchall()
            assert holders and recorded == [(holders[0][0],)], (holders, recorded)
        assert run.run.outcome == "succeeded"
    finally:
        REGISTRY.close_all()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_mysql_database_without_the_ledger_table_records_the_holding_session(mysql_url, uid):
    """The first attempt on a fresh MariaDB database: decide_run fails on the missing tables, the
    attempt goes on one statement at a time, and its row names the connection holding the lock."""
    from tests.support.helpers import mysql_connect

    name = f"h_rounds_{uid}"
    parts = urlsplit(mysql_url)
    admin = mysql_connect(mysql_url)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")  # a constant prefix and a hex suffix
    try:
        fresh = mysql_url.replace(parts.path, "/" + name)
        job = f"rt_{uid}"
        with run_once(job, config=_config(fresh, job, "mysql"), slot=SLOT) as run:
            assert run.acquired, run.run.message
            with admin.cursor() as cur:
                cur.execute("SELECT IS_USED_LOCK(%s)", (job,))
                holder = cur.fetchone()[0]
                cur.execute(
                    f"SELECT session_id FROM `{name}`.lockconsole_runs WHERE job = %s", [job]
                )
                recorded = [int(r[0]) if r[0] is not None else None for r in cur.fetchall()]
            assert holder is not None and recorded == [int(holder)], (holder, recorded)
        assert run.run.outcome == "succeeded"
    finally:
        REGISTRY.close_all()
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS `{name}`")
        admin.close()


def test_a_ledger_without_the_controls_table_falls_back_and_gets_it(pg_url, uid, caplog):
    """An older ledger (runs, no lockconsole_controls): decide_run fails on the missing table, the
    attempt goes on one statement at a time, whose pause lookup creates it; pauses then hold."""
    import psycopg

    from lockconsole.backends.ledger.pauses import Pauses
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Pause

    name = f"h_controls_{uid}"
    parts = urlsplit(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')  # a constant prefix and a hex suffix
    try:
        fresh = pg_url.replace(parts.path, "/" + name)
        job = f"rt_{uid}"
        config = _config(fresh, job)

        def attempt(hour: int):
            with run_once(job, config=config, slot=SLOT.replace(hour=hour)) as run:
                pass
            return run.run

        assert attempt(0).outcome == "succeeded"
        with psycopg.connect(fresh, autocommit=True) as conn:
            conn.execute("DROP TABLE lockconsole_controls")
        REGISTRY.close_all()
        with caplog.at_level("DEBUG", logger="lockconsole"):
            assert attempt(1).outcome == "succeeded"
        assert any(
            "decide_run failed" in r.getMessage() and "lockconsole_controls" in r.getMessage()
            for r in caplog.records
        ), [r.getMessage() for r in caplog.records]
        with psycopg.connect(fresh, autocommit=True) as conn:
            found = conn.execute("SELECT to_regclass('lockconsole_controls')").fetchone()[0]
        assert found == "lockconsole_controls"
        pause = Pause(job, "older ledger", "ops@console", datetime.now(UTC))
        with Ledger(config.ledger_for(config.job(job))) as ledger:
            Pauses(ledger).pause(pause)
        run = attempt(2)
        assert (run.outcome, run.message) == ("paused", pause.reason())
    finally:
        REGISTRY.close_all()
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
