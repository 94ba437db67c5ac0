"""A snapshot is one moment: the ledger server's time when its reads began. Its windows start
at that moment minus the lookback, so a slow read never shifts taken_at away from them (a
figure at a window's edge then agrees with plain SQL)."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg

from lockconsole import run_once
from lockconsole.backends.ledger import clock
from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console

HOLD = 1.5  # seconds the ledger table stays locked against the snapshot's reads


def _server_now(url: str):
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute("SELECT clock_timestamp()").fetchone()[0]


def test_taken_at_is_when_the_reads_began_not_when_they_ended(own_database, uid) -> None:
    job = f"moment_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        'schedule = "* * * * *"\n'
    )
    with run_once(job, config=config, instance="web-1", reuse_connections=False):
        pass  # the ledger table exists, with a row
    for first in (True, False):  # before any clock reading, and with one kept
        if first:
            clock.forget()
        with Console(config, read_only=True) as console:
            if not first:
                console.snapshot(duplicates=False)
            locker = psycopg.connect(own_database)
            locked = threading.Event()

            def hold(locker: psycopg.Connection, locked: threading.Event) -> None:
                locker.execute("LOCK TABLE lockconsole_runs IN ACCESS EXCLUSIVE MODE")
                locked.set()
                threading.Event().wait(HOLD)
                locker.rollback()

            holder = threading.Thread(target=hold, args=(locker, locked))
            holder.start()
            locked.wait(10)
            before = _server_now(own_database)
            snap = console.snapshot(duplicates=False)
            after = _server_now(own_database)
            holder.join()
            locker.close()
        assert snap.errors == (), snap.errors
        assert after - before >= timedelta(seconds=HOLD * 0.9), "the reads waited on the lock"
        # the moment is the reads' start (the reading's own round trip aside), not their end
        assert before - timedelta(seconds=0.2) <= snap.taken_at <= before + timedelta(seconds=0.5)
