"""`run_once` as a context manager and a decorator, on a real PostgreSQL."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.backends.ledger.store import Ledger

from tests.support.helpers import config_for


def runs(config, job):
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        return ledger.runs(job)


def test_context_manager_skips_without_raising(pg_url, uid):
    job = f"api_{uid}"
    config = config_for(pg_url, job)
    with run_once(job, config=config, instance="web-1") as first:
        assert first.acquired
        with run_once(job, config=config, instance="web-2") as second:
            assert not second.acquired
    outcomes = sorted((r.instance, r.outcome) for r in runs(config, job))
    assert outcomes == [("web-1", "succeeded"), ("web-2", "skipped")]


def test_decorator_returns_none_when_skipped(pg_url, uid):
    job = f"deco_{uid}"
    config = config_for(pg_url, job)
    calls: list[str] = []

    @run_once(job, config=config, instance="web-2", trigger="manual")
    def nightly() -> str:
        calls.append("ran")
        return "done"

    with run_once(job, config=config, instance="web-1", trigger="manual") as held:
        assert held.acquired
        assert nightly() is None
    assert nightly() == "done"
    assert calls == ["ran"]


def test_exception_in_body_is_recorded_as_failed(pg_url, uid):
    job = f"fail_{uid}"
    config = config_for(pg_url, job)
    with pytest.raises(ZeroDivisionError), run_once(job, config=config) as run:
        assert run.acquired
        1 / 0  # noqa: B018
    (row,) = runs(config, job)
    assert row.outcome == "failed" and "ZeroDivisionError" in row.message


def test_lock_lost_sets_flag_and_calls_back(pg_url, uid):
    job = f"lostapi_{uid}"
    config = config_for(pg_url, job)
    told = threading.Event()
    with run_once(job, config=config, on_lock_lost=lambda attempt: told.set()) as run:
        with psycopg.connect(pg_url, autocommit=True) as other:
            other.execute("select pg_terminate_backend(%s)", (run.run.session_id,))
        assert told.wait(10), "the callback was called"
        assert run.lost.is_set()
        with pytest.raises(Exception, match="lost"):
            run.check()
    (row,) = runs(config, job)
    assert row.outcome == "lock_lost"


def test_adhoc_url_without_config(pg_url, uid):
    job = f"adhoc_{uid}"
    with run_once(job, url=pg_url, strategy="pg-xact", trigger="manual") as run:
        assert run.acquired
        time.sleep(0.05)
    assert run.run.outcome == "succeeded"
