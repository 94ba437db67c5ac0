"""The run path's merged statements on MariaDB (backends/mysql/merged.py), beyond the usual
"acquired" attempt: a slot that already ran, a lock held elsewhere, a lock lost before the finish,
and a pause, each with the round trips it takes and with untrusted text (the instance that ran
the slot, the pause's words) coming back exactly as it was stored.

A counting TCP proxy sits between lockconsole and the server (as in test_rounds.py); kept
connections (run_once's sessions), so connecting is not counted.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lockconsole import run_once
from lockconsole.backends.merged import LOST, SKIP_HELD
from lockconsole.config.loader import parse_config
from lockconsole.engine.sessions import REGISTRY

from tests.support.tcp_proxy import turns as _turns

pytestmark = [pytest.mark.mysql, pytest.mark.usefixtures("empty_registry")]
SLOT = datetime(2030, 1, 1, 3, tzinfo=UTC)
# quotes, a backslash, pyformat and LIKE characters, control characters, a BOM, 2- to 4-byte UTF-8
ODD = "wéb-1 \"q\" 'x' \\ %s %(x)s _% \t\x01\x1f\x7f\ufeff ☃ 😀"


def _config(url: str, job: str):
    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "mysql"\n'
        f'schedule = "0 3 * * *"\nallow_pooler = true\n'
    )


def _attempt(job: str, config: Any, instance: str, slot: datetime) -> Any:
    """One run_once attempt with an empty body: its Run as recorded."""
    with run_once(job, config=config, instance=instance, slot=slot) as run:
        pass
    return run.run


def _one(conn: Any, sql: str, *params: Any) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchone()


def test_a_slot_that_already_ran_is_skipped_in_one_round_trip_and_lets_the_lock_go(
    mysql_proxy, mysql_conn, uid
):
    counting, url = mysql_proxy
    job = f"mm_{uid}"
    config = _config(url, job)

    def attempt(instance: str, slot: datetime = SLOT):
        return _attempt(job, config, instance, slot)

    first = attempt(ODD)
    assert first.outcome == "succeeded"
    assert attempt("web-2", SLOT.replace(hour=4)).outcome == "succeeded"  # connects web-2
    turns, run = _turns(counting, lambda: attempt("web-2"))
    expected = f"slot already ran on {ODD} (run {first.id}, succeeded)"
    assert (turns, run.outcome, run.message) == (1, "skipped", expected)
    assert run.finished_at is not None and run.session_id is not None
    stored = _one(mysql_conn, "SELECT outcome, message FROM lockconsole_runs WHERE id = %s", run.id)
    assert tuple(stored) == ("skipped", expected)
    assert _one(mysql_conn, "SELECT IS_USED_LOCK(%s)", job)[0] is None  # decide let it go
    assert len(REGISTRY) == 2  # both sessions kept: neither holds the lock
    assert attempt("web-2", SLOT.replace(hour=5)).outcome == "succeeded"


def test_a_lock_held_elsewhere_is_skipped_in_one_round_trip(mysql_proxy, mysql_conn, uid):
    counting, url = mysql_proxy
    job = f"mm_{uid}"
    config = _config(url, job)

    def attempt(hour: int):
        return _attempt(job, config, "web-1", SLOT.replace(hour=hour))

    assert attempt(0).outcome == "succeeded"  # connects
    assert _one(mysql_conn, "SELECT GET_LOCK(%s, 0)", job)[0] == 1
    try:
        turns, run = _turns(counting, lambda: attempt(1))
        assert (turns, run.outcome, run.message) == (1, "skipped", SKIP_HELD)
        holder = _one(mysql_conn, "SELECT IS_USED_LOCK(%s), CONNECTION_ID()", job)
        assert holder[0] == holder[1]  # still this test's
    finally:
        _one(mysql_conn, "SELECT RELEASE_LOCK(%s)", job)
    assert attempt(1).outcome == "succeeded"


@pytest.fixture
def merged(mysql_url, uid):
    """A job's MysqlLock, the ledger of its database and the merged statements on that lock,
    driven directly: no watchdog shares the lock's connection with the test."""
    from lockconsole.backends.factory import merged_for, open_lock
    from lockconsole.backends.ledger.store import Ledger

    job = f"mm_{uid}"
    config = _config(mysql_url, job)
    database = config.database_for(config.job(job))
    lock: Any = open_lock(config.job(job), database, instance="web-1", application_name="test")
    ledger = Ledger(config.ledger_for(config.job(job)))
    ledger.create_schema()
    try:
        yield lock, ledger, merged_for(lock, database, database)
    finally:
        lock.close()
        ledger.close()


def _base(ledger: Any, job: str, instance: str, hour: int) -> Any:
    from lockconsole.model.jobs import Run

    return Run(
        job=job,
        slot=SLOT.replace(hour=hour),
        instance=instance,
        host="test-host",
        pid=4242,
        trigger="scheduled",
        outcome="skipped",
        started_at=ledger.now(),
        strategy="mysql",
        lock_key=job,
        clock_offset_ms=0,
    )


def test_a_lock_lost_before_the_finish_is_recorded_lock_lost(merged, mysql_conn):
    """The lock's connection is alive but no longer holds the name when the job ends: the merged
    finish writes "lock_lost" (not the job's outcome) and lets nothing go."""
    from lockconsole.backends.merged import Finished
    from lockconsole.backends.mysql.merged import MysqlMerged

    lock, ledger, statements = merged
    assert isinstance(statements, MysqlMerged)
    run = statements.decide(ledger, _base(ledger, lock.name, "web-1", 3), claims=True)
    assert run is not None and run.outcome == "acquired" and lock.held
    with lock.conn.cursor() as cur:  # what the job did meanwhile
        cur.execute("SELECT RELEASE_LOCK(%s)", (lock.name,))
    finished = statements.finish(ledger, run, "succeeded", exit_code=0, message=None)
    assert finished == Finished(held=False, outcome="lock_lost", released=False)
    assert (lock.held, lock.lost_on_release) == (False, True)
    stored = _one(mysql_conn, "SELECT outcome, message FROM lockconsole_runs WHERE id = %s", run.id)
    assert tuple(stored) == ("lock_lost", LOST)
    assert _one(mysql_conn, "SELECT IS_USED_LOCK(%s)", lock.name)[0] is None


def test_a_session_that_stops_backslash_escapes_gets_its_values_escaped_again(merged, mysql_conn):
    """The merged statements keep each value's escaped form on the lock; NO_BACKSLASH_ESCAPES
    changes how a string is escaped, so a kept form is not reused across that change."""
    from lockconsole.backends.merged import Finished

    lock, ledger, statements = merged
    instance = "web\\'1\\"  # a backslash before a quote, and one at the end
    done = Finished(held=True, outcome="succeeded", released=True)
    for hour in (3, 4):
        run = statements.decide(ledger, _base(ledger, lock.name, instance, hour), claims=True)
        assert run is not None and run.outcome == "acquired"
        if hour == 3:  # between the two statements of one attempt, as between attempts
            with lock.conn.cursor() as cur:
                cur.execute("SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')")
        assert statements.finish(ledger, run, "succeeded", exit_code=0, message=instance) == done
    with mysql_conn.cursor() as cur:
        cur.execute(
            "SELECT instance, outcome, message FROM lockconsole_runs WHERE job = %s", (lock.name,)
        )
        assert cur.fetchall() == ((instance, "succeeded", instance),) * 2


def test_a_pause_in_untrusted_words_is_recorded_exactly(mysql_proxy, uid):
    from lockconsole.backends.ledger.pauses import Pauses
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Pause

    counting, url = mysql_proxy
    job = f"mm_{uid}"
    config = _config(url, job)

    def attempt(hour: int):
        return _attempt(job, config, "web-1", SLOT.replace(hour=hour))

    assert attempt(0).outcome == "succeeded"  # connects; the ledger's tables exist
    now = datetime.now(UTC)
    for until in (now.replace(microsecond=7) + timedelta(hours=1), None):
        pause = Pause(
            job,
            f"{ODD}\nline two\r\n\x00end",
            ODD,
            now.replace(microsecond=999999) - timedelta(minutes=1),
            until,
        )
        with Ledger(config.ledger_for(config.job(job))) as ledger:
            Pauses(ledger).pause(pause)
            attempt(1)  # may connect the ledger's own connection (run_once keeps it)
            turns, run = _turns(counting, lambda: attempt(2))  # noqa: B023
            assert (turns, run.outcome, run.message) == (2, "paused", pause.reason())
            [stored] = [r for r in ledger.runs(job) if r.id == run.id]
            assert (stored.outcome, stored.message) == ("paused", pause.reason())
            Pauses(ledger).resume(job, datetime.now(UTC))
    assert attempt(3).outcome == "succeeded"


def _sent(monkeypatch: Any) -> list[str]:
    """Every call the merged statements send from now on, as sent."""
    from lockconsole.backends.mysql import answers

    sent: list[str] = []
    real = answers.call
    monkeypatch.setattr(answers, "call", lambda conn, sql: sent.append(sql) or real(conn, sql))
    return sent


def _decides(sent: list[str]) -> list[str]:
    return [sql for sql in sent if "lockconsole_decide_run" in sql or "GET_LOCK" in sql]


@pytest.mark.parametrize("form", ["prepared", "compound", "seven"])
def test_decide_prepared_or_as_one_compound_statement_or_as_seven_means_the_same(
    merged, mysql_conn, monkeypatch, form
):
    """MariaDB gets decide as one compound statement, prepared once per connection (text where
    the server will not prepare it); MySQL, which has no anonymous compound statement, gets its
    seven statements. The three forms, on this MariaDB: a first attempt acquires, a second
    instance finds the slot already run (the message exact, with untrusted words), and the lock
    is let go. The probe of the UPDATE privilege goes with the first decide on a connection."""
    from lockconsole.backends.mysql import merged as mysql_merged

    lock, ledger, statements = merged
    assert mysql_merged._is_mariadb(lock.conn)
    if form == "seven":
        monkeypatch.setattr(mysql_merged, "_is_mariadb", lambda conn: False)
    elif form == "compound":
        lock.preparing = False
    sent = _sent(monkeypatch)
    first = statements.decide(ledger, _base(ledger, lock.name, ODD, 3), claims=True)
    assert first is not None and first.outcome == "acquired"
    assert statements.finish(ledger, first, "succeeded", exit_code=0, message=None) is not None
    again = statements.decide(ledger, _base(ledger, lock.name, "web-2", 3), claims=True)
    assert again is not None and again.outcome == "skipped"
    assert again.message == f"slot already ran on {ODD} (run {first.id}, succeeded)"
    assert not lock.held and _one(mysql_conn, "SELECT IS_USED_LOCK(%s)", lock.name)[0] is None
    decides = _decides(sent)
    assert len(decides) == 2
    assert ["WHERE 1 = 0" in sql for sql in decides] == [True, False]  # the probe, then not
    if form == "prepared":
        assert decides[0].startswith("PREPARE lockconsole_decide_run_0 FROM 'BEGIN NOT ATOMIC")
        assert "\nEXECUTE lockconsole_decide_run_0 USING " in decides[0]
        assert decides[1].startswith("PREPARE lockconsole_decide_run_probed_0 FROM")
    else:
        assert all(sql.startswith("BEGIN NOT ATOMIC") is (form == "compound") for sql in decides)
        assert not any("PREPARE" in sql or "EXECUTE" in sql for sql in decides)


def _slot_rows(conn: Any, job: str, hour: int) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(
            "SELECT instance, outcome FROM lockconsole_runs WHERE job = %s AND slot = %s",
            (job, SLOT.replace(hour=hour, tzinfo=None)),
        )
        return [tuple(row) for row in cur.fetchall()]


def test_statements_deallocated_behind_its_back_are_prepared_again(merged, mysql_conn, monkeypatch):
    """A prepared statement of ours gone from the connection (DEALLOCATE from elsewhere in the
    session): its EXECUTE is refused before anything ran, so the call prepares it again and runs
    once; the attempt is recorded once."""
    lock, ledger, statements = merged
    done = None
    for hour in (3, 4):  # both decide forms and the finish prepared on this connection
        run = statements.decide(ledger, _base(ledger, lock.name, "web-1", hour), claims=True)
        assert run is not None and run.outcome == "acquired"
        done = statements.finish(ledger, run, "succeeded", exit_code=0, message=None)
    assert done is not None
    assert lock.prepared == {"decide_run", "decide_run:probed", "finish_release_run"}
    with lock.conn.cursor() as cur:
        for name in ("lockconsole_decide_run_probed_0", "lockconsole_finish_release_run_0"):
            cur.execute(f"DEALLOCATE PREPARE {name}")
    sent = _sent(monkeypatch)
    run = statements.decide(ledger, _base(ledger, lock.name, "web-1", 5), claims=True)
    assert run is not None and run.outcome == "acquired"
    finished = statements.finish(ledger, run, "succeeded", exit_code=0, message=None)
    assert finished is not None and finished.outcome == "succeeded"
    assert [sql.startswith("EXECUTE") for sql in sent] == [True, False, True, False]
    assert "PREPARE lockconsole_decide_run_probed_0" in sent[1]
    assert "PREPARE lockconsole_finish_release_run_0" in sent[3]
    assert _slot_rows(mysql_conn, lock.name, 5) == [("web-1", "succeeded")]


def _unparsable_prepare(good: Any) -> Any:
    """The server refuses the PREPARE: a text it cannot parse."""
    from lockconsole.backends.mysql import merged as mysql_merged

    bad = tuple((ps, "THIS IS NOT SQL ?") for ps, _ in good.statements)
    return mysql_merged._Prepared(bad, good.execute, good.names)


def _unparsable_execute(good: Any) -> Any:
    """The PREPAREs pass, the first EXECUTE is refused as unparsable (as an old MariaDB without
    expressions in USING refuses it)."""
    from lockconsole.backends.mysql import merged as mysql_merged

    return mysql_merged._Prepared(good.statements, good.execute + " USING", good.names)


@pytest.mark.parametrize("broken", [_unparsable_prepare, _unparsable_execute])
def test_a_call_the_server_will_not_prepare_or_execute_goes_as_text(
    merged, mysql_conn, monkeypatch, broken
):
    """A refused PREPARE, or a first EXECUTE refused before it ran: nothing ran, the call goes
    as text at once, and every merged call on that connection from then on; the attempt is
    recorded once."""
    from lockconsole.backends.mysql import merged as mysql_merged

    lock, ledger, statements = merged
    real = mysql_merged._prepared
    monkeypatch.setattr(mysql_merged, "_prepared", lambda name: broken(real(name)))
    sent = _sent(monkeypatch)
    run = statements.decide(ledger, _base(ledger, lock.name, "web-1", 3), claims=True)
    assert run is not None and run.outcome == "acquired"
    assert statements.finish(ledger, run, "succeeded", exit_code=0, message=None) is not None
    assert (lock.preparing, lock.prepared) == (False, set())
    assert [sql.split(None, 1)[0] for sql in sent] == ["PREPARE", "BEGIN", "UPDATE"]
    assert _slot_rows(mysql_conn, lock.name, 3) == [("web-1", "succeeded")]
    sent.clear()
    run = statements.decide(ledger, _base(ledger, lock.name, "web-1", 4), claims=True)
    assert run is not None and run.outcome == "acquired"
    assert len(sent) == 1 and sent[0].startswith("BEGIN NOT ATOMIC")


def test_a_processs_first_attempt_opens_one_connection_and_reads_the_clock_on_it(mysql_proxy, uid):
    """The first attempt of a process reads the server's clock (the ledger's one clock) on the
    lock's own connection when the ledger shares its database: one connection, not two. The
    proxy's port makes the server new to this process's clock readings."""
    from types import SimpleNamespace

    from lockconsole.backends.ledger import clock

    counting, url = mysql_proxy
    job = f"mm_{uid}"
    config = _config(url, job)
    ledger_db = config.ledger_for(config.job(job))
    server = SimpleNamespace(clock_key=clock.server_key("mysql", ledger_db.url))
    assert clock.known(server) is None
    assert _attempt(job, config, "web-1", SLOT).outcome == "succeeded"
    assert len(counting._live) == 2  # one client connection and its upstream
    assert clock.known(server) is not None
