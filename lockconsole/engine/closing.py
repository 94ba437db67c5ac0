"""Closing an attempt: the lock's last check, and the outcome write that outlasts a restart."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from lockconsole.backends import Lock, LockBase
from lockconsole.backends.ledger.store import Ledger
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Run

log = logging.getLogger("lockconsole.engine.runner")
LEDGER_RETRY_SECONDS = 20.0  # how long the final ledger write waits out a restarting database


def lock_still_held(lock: Lock) -> bool:
    """The lock's own check after the job ended; an error counts as a loss."""
    try:
        return bool(lock.still_held())
    except Exception as exc:
        log.debug("the final check of the lock failed: %s", exc)
        return False


def borrow_lock_connection(ledger: Ledger, lock: Lock | None) -> bool:
    """Let the ledger write on the lock's own connection (still open: the lock is held until
    after the outcome is written), when that is an autocommit session on the ledger's database."""
    if not isinstance(lock, LockBase) or lock.strategy not in ("pg-session", "mysql"):
        return False
    conn = getattr(lock, "conn", None)
    if conn is None or lock._gone() or lock.database.url.raw != ledger.url.raw:
        return False
    ledger._drop_connection()
    ledger.borrow(conn)
    return True


def retrying(write: Callable[[], Run]) -> Run:
    """A ledger write, retried while the database is briefly away (a restart, a failover).

    Only connection trouble (DatabaseError) is retried: a missing privilege (LedgerDenied) or
    a row closed by another instance (RunClosedError) is final and raised at once.
    """
    deadline = time.monotonic() + LEDGER_RETRY_SECONDS
    pause = 0.2
    while True:
        try:
            return write()
        except DatabaseError as exc:
            if time.monotonic() + pause > deadline:
                raise
            log.warning("recording the outcome failed, retrying: %s", exc)
            time.sleep(pause)
            pause = min(pause * 2, 2.0)
