"""Wake-ups for a run-request server: one LISTEN session per PostgreSQL ledger database, each
in a daemon thread of its own, that sets the server's `wake` event when a request's NOTIFY (on
`lockconsole_requests`) arrives, so the server looks at once instead of at its next poll.

Every database gets its LISTEN before `start()` returns, so a server that starts its wake-ups
and then looks misses no request: one queued before the LISTEN is found by that look, one queued
after it wakes the server. A session that fails is opened again after `retry` seconds and then
wakes the server once, for the requests queued while nobody listened. Databases that are not
PostgreSQL are left to the server's polling.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.threads import start_quiet
from lockconsole.model.jobs import Database

log = logging.getLogger(__name__)
LISTEN_WAIT = 0.5  # seconds a listening thread waits for a NOTIFY before it checks for a stop


class Wakeups:
    """LISTEN on every PostgreSQL database of `databases`; set `wake` on each NOTIFY."""

    def __init__(
        self,
        databases: Sequence[Database],
        *,
        wake: threading.Event,
        stopping: threading.Event,
        retry: float,
    ) -> None:
        self.databases = [d for d in databases if d.url.dialect == "postgresql"]
        self.wake = wake
        self.stopping = stopping
        self.retry = retry
        self._threads: list[threading.Thread] = []

    def start(self) -> Wakeups:
        """LISTEN on each database (here, before returning), then wait for NOTIFYs in threads."""
        for database in self.databases:
            conn = _listen(database)
            thread = threading.Thread(
                target=self._wait, args=(database, conn), daemon=True, name="lockconsole-listen"
            )
            self._threads.append(thread)
            start_quiet(thread)
        return self

    def join(self, wait: float) -> None:
        """After `stopping` is set: wait (up to `wait` s each) for the threads to close."""
        for thread in self._threads:
            thread.join(wait)

    def _wait(self, database: Database, conn: Any) -> None:
        try:
            while not self.stopping.is_set():
                if conn is None:
                    if self.stopping.wait(self.retry):
                        break
                    conn = _listen(database)
                    if conn is not None:
                        self.wake.set()  # requests queued while nobody listened
                    continue
                try:
                    for _ in conn.notifies(timeout=LISTEN_WAIT):
                        self.wake.set()
                        if self.stopping.is_set():
                            break
                except Exception as exc:  # the session is gone: listen again later
                    log.warning("listening for requests on %s: %s", database.url.masked, exc)
                    _close(conn)
                    conn = None
        finally:
            if conn is not None:
                _close(conn)


def _listen(database: Database) -> Any:
    """A session that LISTENs for run requests, or None (logged) when the database is away."""
    from lockconsole.backends.connect import connect_pg

    conn = None
    try:
        conn = connect_pg(database.url, application_name="lockconsole:requests")
        conn.execute(sqlfiles.load("listen_requests", "postgresql"))
    except Exception as exc:
        log.warning("listening for requests on %s: %s", database.url.masked, exc)
        if conn is not None:
            _close(conn)
        return None
    return conn


def _close(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # closing a broken session: nothing more to do with it
        pass
