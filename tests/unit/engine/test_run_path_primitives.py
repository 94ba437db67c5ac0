"""The run path's cheap forms keep their meaning: a Stop's Event made on first use, the held
signals delivered after, a deadline armed and disarmed without a generator, the finish's Run
stamped with the time its statement stored, an aware UTC time passed through to PostgreSQL."""

from __future__ import annotations

import os
import signal
import threading
from datetime import UTC, datetime, timedelta, timezone

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.timestamps import to_db
from lockconsole.config.urls import parse_url
from lockconsole.engine.closing import Deadlines
from lockconsole.engine.stopping import Stop, holding_signals
from lockconsole.model.jobs import Database, Run

from tests.support.helpers import DEADLINE


def test_a_stop_requested_before_its_event_was_made_sets_it() -> None:
    stop = Stop()
    assert not stop.is_set() and not stop.wait(0)
    stop.request("first")
    stop.request("second")
    assert stop.is_set() and stop.event.is_set() and stop.wait(0) and stop.reason == "first"


def test_a_stop_requested_after_its_event_was_made_sets_it() -> None:
    stop = Stop()
    event = stop.event
    assert not event.is_set()
    threading.Timer(0.01, stop.request, args=("later",)).start()
    assert event.wait(DEADLINE) and stop.is_set()


def test_a_stop_whose_event_a_job_set_itself_reads_as_set() -> None:
    """attempt.stop is the Event a job may hold as its stop flag, and set itself."""
    stop = Stop()
    stop.event.set()
    assert stop.is_set() and stop.wait(0) and stop.reason is None


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
def test_held_signals_are_delivered_after_in_order_and_request_the_stop() -> None:
    got: list[int] = []
    old_term = signal.signal(signal.SIGTERM, lambda signum, _frame: got.append(signum))
    try:
        stop = Stop()
        with pytest.raises(KeyboardInterrupt), holding_signals(stop):
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # Python runs its handlers between bytecodes
                pass
            assert got == []  # noted, not acted on
            assert stop.is_set() and stop.signum == signal.SIGTERM
        assert got == [signal.SIGTERM]  # delivered first, then SIGINT's KeyboardInterrupt
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGTERM, old_term)


def test_an_armed_deadline_cuts_and_a_disarmed_one_does_not() -> None:
    deadlines = Deadlines()
    cut, spared = threading.Event(), threading.Event()
    token = deadlines.arm(60, spared.set)
    deadlines.disarm(token)
    token = deadlines.arm(0.05, cut.set)
    assert cut.wait(DEADLINE)
    deadlines.disarm(token)  # after its cut: harmless
    with deadlines.bound(0.1, spared.set):
        pass
    assert not spared.wait(0.3)


def test_the_finish_run_is_stamped_with_the_time_its_statement_stored() -> None:
    ledger = Ledger(Database("main", parse_url("postgresql://u@127.0.0.1:1/none")))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run = Run("job", start, "web-1", "host", 1, "scheduled", "acquired", start, id=7)
    stored = start + timedelta(seconds=3)
    params = ledger.finish_params(run, "succeeded", exit_code=0, finished_at=stored)
    again = ledger.finish_params_again(run, "lock_lost", exit_code=0, message="gone")
    assert params["finished"] == again["finished"] == stored
    assert again["outcome"] == "lock_lost" and again["message"] == "gone"


def test_insert_params_hold_every_column_but_the_id() -> None:
    from lockconsole.backends.ledger.store import _INSERT_COLUMNS

    ledger = Ledger(Database("main", parse_url("postgresql://u@127.0.0.1:1/none")))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    run = Run("job", start, "web-1", "host", 1, "scheduled", "acquired", start, id=7)
    params = ledger.insert_params(run)
    assert set(params) == set(_INSERT_COLUMNS) and "id" not in params
    assert params["started_at"] == start and params["finished_at"] is None


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_to_db_of_utc_and_other_offsets(dialect: str) -> None:
    utc = datetime(2026, 1, 1, 12, 30, 0, 123456, tzinfo=UTC)
    elsewhere = utc.astimezone(timezone(timedelta(hours=2)))
    assert to_db(utc, dialect) == to_db(elsewhere, dialect)
    if dialect == "postgresql":
        assert to_db(utc, dialect) is utc
    with pytest.raises(ValueError):
        to_db(utc.replace(tzinfo=None), dialect)
