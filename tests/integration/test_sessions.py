"""Lock sessions kept between attempts (`run_once`, the scheduler), on real databases."""

from __future__ import annotations

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.backends.ledger.store import Ledger
from lockconsole.engine.runner import begin
from lockconsole.engine.sessions import REGISTRY, SessionRegistry

from tests.support import helpers

pytestmark = pytest.mark.usefixtures("empty_registry")


def config_for(url: str, job: str, strategy: str, extra: str = ""):
    return helpers.config_for(url, job, strategy, "once_per_slot = false\n" + extra)


def outcomes(config, job):
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        return sorted(r.outcome for r in ledger.runs(job))


def kept_session_pids(config, job: str) -> tuple[int, int]:
    """One attempt of `job` on web-1, then the server pids of the lock and ledger connections
    it left kept in the registry."""
    from lockconsole.engine.sessions import session_key

    with run_once(job, config=config, instance="web-1") as run:
        first = run.run.session_id
    j = config.job(job)
    key = session_key(j, config.database_for(j), config.ledger_for(j), "web-1")
    session = REGISTRY.take(key)
    assert session is not None
    ledger_pid = session.ledger.connection.info.backend_pid
    assert REGISTRY.put(session)
    assert first is not None
    return first, ledger_pid


def pg_advisory_locks(conn, pid: int | None) -> list[tuple]:
    query = "SELECT objid FROM pg_locks WHERE locktype = 'advisory' AND pid = %s"
    return conn.execute(query, (pid,)).fetchall()


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_postgres_session_is_reused_and_holds_nothing_between_attempts(
    pg_url, pg_conn, uid, strategy
):
    job = f"reuse_{uid}"
    config = config_for(pg_url, job, strategy)
    pids = []
    for _ in range(3):
        with run_once(job, config=config, instance="web-1") as run:
            assert run.acquired
            pids.append(run.run.session_id)
            assert pg_advisory_locks(pg_conn, run.run.session_id)  # held while the body runs
        assert pg_advisory_locks(pg_conn, pids[-1]) == []  # released once the block exits
        state = pg_conn.execute(
            "SELECT state FROM pg_stat_activity WHERE pid = %s", (pids[-1],)
        ).fetchone()
        assert state == ("idle",)  # kept open, not inside a transaction
    assert len(set(pids)) == 1, "one lock connection for every attempt"
    assert len(REGISTRY) == 1
    assert outcomes(config, job) == ["succeeded"] * 3


def test_mysql_session_is_reused_and_holds_nothing_between_attempts(mysql_url, mysql_conn, uid):
    job = f"reuse_my_{uid}"
    config = config_for(mysql_url, job, "mysql")
    ids = []
    for _ in range(2):
        with run_once(job, config=config, instance="web-1") as run:
            assert run.acquired
            ids.append(run.run.session_id)
        with mysql_conn.cursor() as cur:
            cur.execute("SELECT IS_USED_LOCK(%s)", (job,))
            assert cur.fetchone() == (None,)
    assert ids[0] == ids[1]
    assert outcomes(config, job) == ["succeeded", "succeeded"]


def test_lease_session_is_reused(pg_url, uid):
    job = f"reuse_lease_{uid}"
    config = config_for(pg_url, job, "lease", f'lease_table = "shedlock_{uid}"')
    tokens = []
    try:
        for _ in range(2):
            with run_once(job, config=config, instance="web-1") as run:
                assert run.acquired
                tokens.append(run.run.fencing_token)
            assert len(REGISTRY) == 1
        assert tokens == [1, 2]
    finally:
        REGISTRY.close_all()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP TABLE IF EXISTS shedlock_{uid}")


def test_not_reused_after_lock_lost(pg_url, pg_conn, uid):
    job = f"lost_{uid}"
    config = config_for(pg_url, job, "pg-session")
    with run_once(job, config=config) as run:
        first = run.run.session_id
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (first,))
        assert run.lost.wait(10)
    assert len(REGISTRY) == 0
    with run_once(job, config=config) as run:
        assert run.acquired and run.run.session_id != first
    assert outcomes(config, job) == ["lock_lost", "succeeded"]


def test_kept_connections_that_died_are_replaced(pg_url, pg_conn, uid):
    """Both kept connections killed while idle (a restart, an idle timeout): a new session."""

    job = f"died_{uid}"
    config = config_for(pg_url, job, "pg-session")
    first, ledger_pid = kept_session_pids(config, job)
    for pid in (first, ledger_pid):
        pg_conn.execute("SELECT pg_terminate_backend(%s, 30000)", (pid,))  # waits for the exit
    with run_once(job, config=config, instance="web-1") as run:
        assert run.acquired and run.run.session_id != first
    assert outcomes(config, job) == ["succeeded", "succeeded"]


def test_not_reused_when_the_body_fails_to_release(pg_url, pg_conn, uid):
    """A session whose unlock found nothing to unlock is closed, not kept."""
    job = f"unlock_{uid}"
    config = config_for(pg_url, job, "pg-session")
    with run_once(job, config=config) as run:
        run.lock.held = True
        run.lock.lost_on_release = True  # as if pg_advisory_unlock had returned false
    assert len(REGISTRY) == 0


def test_reuse_off_closes_every_connection(pg_url, pg_conn, uid):
    job = f"noreuse_{uid}"
    config = config_for(pg_url, job, "pg-session")
    pids = []
    for _ in range(2):
        with run_once(job, config=config, reuse_connections=False) as run:
            pids.append(run.run.session_id)
    assert pids[0] != pids[1] and len(REGISTRY) == 0
    alive = "SELECT count(*) FROM pg_stat_activity WHERE pid = ANY(%s)"
    # a backend leaves pg_stat_activity a moment after its client closed the connection
    helpers.wait_for(
        lambda: pg_conn.execute(alive, (pids,)).fetchone() == (0,), what="backends gone"
    )


def test_a_skip_keeps_the_session_and_records_the_row(pg_url, uid):
    job = f"skipkeep_{uid}"
    config = config_for(pg_url, job, "pg-session")
    with run_once(job, config=config, instance="web-1") as held:
        assert held.acquired
        for _ in range(2):
            with run_once(job, config=config, instance="web-2") as other:
                assert not other.acquired
    assert len(REGISTRY) == 2  # one idle session per instance
    assert outcomes(config, job) == ["skipped", "skipped", "succeeded"]


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_one_shot_skip_is_recorded_and_closes_its_connections(pg_url, pg_conn, uid, strategy):
    job = f"oneshot_{uid}"
    config = config_for(pg_url, job, strategy)
    j, db = config.job(job), config.database_for(config.job(job))
    held = begin(j, db, config.ledger_for(j), instance="web-1")
    try:
        skipped = begin(j, db, config.ledger_for(j), instance="web-2")
        assert not skipped.acquired and skipped.run.id is not None
        assert skipped.ledger._conn is None  # closed (or never opened)
    finally:
        held.finish("succeeded", exit_code=0)
    assert outcomes(config, job) == ["skipped", "succeeded"]
    apps = pg_conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s",
        (f"lockconsole:{job}@web-2",),
    ).fetchone()
    assert apps == (0,)


def test_registry_takes_and_closes_what_it_cannot_keep(pg_url, uid):
    job = f"reg_{uid}"
    config = config_for(pg_url, job, "pg-session")
    registry = SessionRegistry()
    j, db = config.job(job), config.database_for(config.job(job))
    a = begin(j, db, config.ledger_for(j), instance="web-1", sessions=registry)
    a.finish("succeeded", exit_code=0)
    assert len(registry) == 1
    b = begin(j, db, config.ledger_for(j), instance="web-1", sessions=registry)
    assert len(registry) == 0  # taken, not shared
    c = begin(j, db, config.ledger_for(j), instance="web-1", sessions=registry)
    assert b.acquired and not c.acquired  # a second session of the same key was opened
    b.finish("succeeded", exit_code=0)
    assert len(registry) == 1  # the skipped one went back first; b's was one too many
    registry.close_all()
    assert len(registry) == 0


@pytest.mark.parametrize("ledger_apart", [False, True], ids=["merged", "ledger-apart"])
def test_kept_connections_that_died_before_the_clock_reread_are_replaced(
    pg_url, pg_conn, own_database, uid, ledger_apart
):
    """The hourly re-read of the server's clock (and, where the ledger sits in another database,
    the pause read) is an attempt's first statement on its kept ledger connection: when that
    connection died while idle, the attempt starts again on fresh connections instead of
    raising the dead connection's error to the job."""
    from lockconsole.backends.ledger import clock
    from lockconsole.config.loader import parse_config

    job = f"reread_{uid}"
    ledger_url = own_database if ledger_apart else pg_url
    config = parse_config(
        f'[lockconsole]\nledger_database = "books"\n[databases.main]\nurl = "{pg_url}"\n'
        f'[databases.books]\nurl = "{ledger_url}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        f'database = "main"\nonce_per_slot = false\nwatchdog_interval = 0.2\n'
    )
    first, ledger_pid = kept_session_pids(config, job)
    with psycopg.connect(ledger_url, autocommit=True) as books:
        books.execute("SELECT pg_terminate_backend(%s, 30000)", (ledger_pid,))
    pg_conn.execute("SELECT pg_terminate_backend(%s, 30000)", (first,))
    clock.forget()  # as an hour after the last reading: the next attempt asks the server again
    with run_once(job, config=config, instance="web-1") as run:
        assert run.acquired and run.run.session_id != first
    assert outcomes(config, job) == ["succeeded", "succeeded"]


def _end_the_attempts_sessions_once(database_url: str, ended: list[int]):
    """A BEFORE_TRY_LOCK hook that ends every other session of the test's own database (only
    the attempt's), once: the try after it goes through."""
    from lockconsole.engine import faultpoints as fp

    def hook() -> None:
        fp.set_hook(fp.BEFORE_TRY_LOCK, None)
        with psycopg.connect(database_url, autocommit=True) as admin:
            rows = admin.execute(
                "SELECT pid, pg_terminate_backend(pid, 30000) FROM pg_stat_activity"
                " WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchall()
        ended.extend(pid for pid, done in rows if done)

    return hook


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_a_fresh_session_ended_by_the_server_before_its_try_is_tried_again(
    own_database, uid, strategy
):
    """In a process that keeps its sessions (run_once, schedule), a fresh session the server
    ends between connecting and the try-lock (an operator's pg_terminate_backend, a failover)
    holds nothing: the attempt is made again, once, on a fresh connection instead of raising
    the dead connection's error to the app (a soak runner behind a hung peer exited on it)."""
    from lockconsole.config.loader import parse_config
    from lockconsole.engine import faultpoints as fp

    job = f"ended_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        "once_per_slot = false\nwatchdog_interval = 0.2\n"
    )
    ended: list[int] = []
    fp.set_hook(fp.BEFORE_TRY_LOCK, _end_the_attempts_sessions_once(own_database, ended))
    try:
        with run_once(job, config=config, instance="web-1") as run:  # kept sessions, all fresh
            assert run.acquired
            assert run.run.session_id not in ended
    finally:
        fp.set_hook(fp.BEFORE_TRY_LOCK, None)
    assert ended, "the attempt's session was ended before its try"
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        assert [r.outcome for r in ledger.runs(job)] == ["succeeded"]


def test_a_one_shot_attempt_reports_a_session_the_server_ended(own_database, uid):
    """Without kept sessions (`lockconsole run`), the same fault is the caller's to see: the
    database error is raised, nothing is recorded and no lock stays held."""
    from lockconsole.config.loader import parse_config
    from lockconsole.engine import faultpoints as fp
    from lockconsole.model.errors import DatabaseError

    job = f"ended_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        "once_per_slot = false\n"
    )
    ended: list[int] = []
    fp.set_hook(fp.BEFORE_TRY_LOCK, _end_the_attempts_sessions_once(own_database, ended))
    try:
        one_shot = run_once(job, config=config, instance="web-1", reuse_connections=False)
        with pytest.raises(DatabaseError), one_shot:
            pytest.fail("the attempt ran on a session the server ended")
    finally:
        fp.set_hook(fp.BEFORE_TRY_LOCK, None)
    assert ended
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        assert ledger.runs(job) == []
    with psycopg.connect(own_database, autocommit=True) as admin:
        held = admin.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND database ="
            " (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    assert held is not None and held[0] == 0
