"""Closing an attempt: the lock's last check, the outcome write that outlasts a restart, and
the client-side deadline every check of the lock runs under.

A check waits on the server, and the server's own timeouts (statement_timeout, the kernel's
TCP_USER_TIMEOUT) never fire when a peer on the way (a sidecar proxy, a pooler, a NAT box)
keeps acknowledging the bytes and never answers. `within` bounds such a call on our side: it
runs on a thread of its own, and a call that has not answered in time is given up (Overdue),
so the caller can count the lock as lost and cut the connection loose.

The try-lock and the record of an attempt run on the calling thread instead (no thread per
attempt: the run path stays as fast as the raw driver). Each is registered with `DEADLINES`,
one thread per process; a call still running past its deadline has its connection cut loose
(a blocked call then returns with an error, and the server session is ended from a fresh
connection where one can be made), so a kept session that a hung peer silenced neither blocks
the next attempt for ever nor lets its session hold the lock.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from lockconsole.backends import Lock, LockBase
from lockconsole.backends.connect import shut_socket
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.threads import start_quiet
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Run

log = logging.getLogger(__name__)
LEDGER_RETRY_SECONDS = 20.0  # how long the final ledger write waits out a restarting database
_T = TypeVar("_T")


class Overdue(Exception):
    """A call to the database gave no answer within its deadline."""


class _Worker:
    """A daemon thread that runs within()'s calls one at a time (a thread started per call
    cost the run path ~0.15 ms an attempt); one whose call never returns is left to it."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        start_quiet(threading.Thread(target=self._serve, name="lockconsole-deadline", daemon=True))

    def _serve(self) -> None:
        while True:
            self.calls.get()()


_IDLE: list[_Worker] = []  # workers whose last call returned
_IDLE_GUARD = threading.Lock()


def within(
    seconds: float,
    call: Callable[[], _T],
    what: str,
    *,
    stop: threading.Event | None = None,
    stop_seconds: float = 0.0,
) -> _T:
    """`call()`'s result, or Overdue when it has not returned in `seconds` (its thread is left
    to end with its connection: cut the connection loose to end it). Once `stop` is set, at
    most `stop_seconds` more are waited."""
    box: dict[str, object] = {}
    done = threading.Event()
    with _IDLE_GUARD:
        worker = _IDLE.pop() if _IDLE else None
    worker = worker or _Worker()

    def work() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the caller
            box["error"] = exc
        finally:
            with _IDLE_GUARD:  # back for the next call only once this one returned
                _IDLE.append(worker)
            done.set()

    worker.calls.put(work)
    start = time.monotonic()
    deadline = start + seconds
    while not done.wait(max(0.0, min(0.1, deadline - time.monotonic()))):
        now = time.monotonic()
        if stop is not None and stop.is_set():
            deadline = min(deadline, now + stop_seconds)
            stop = None  # counted once: from when the stop was seen
        if now >= deadline:
            raise Overdue(f"{what}: no answer within {now - start:.1f} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


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
    if conn is None or lock.gone() or not lock.database.shares_connection(ledger.database):
        return False
    ledger.drop_connection()
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


CLEANUP_SECONDS = 3.0  # seconds to end our own stuck session from a fresh connection


def cut_loose(lock: Lock, job: str) -> None:
    """The lock's connection stopped answering: cut our end of it (a call blocked on it
    returns), then end our own server session (see end_stuck_session)."""
    abandon = getattr(lock, "abandon", None)
    if abandon is not None:
        abandon()
    end_stuck_session(lock, job)


def end_stuck_session(lock: Lock, job: str) -> None:
    """From a fresh connection where one can be made, end our own server session, which a peer
    that keeps the socket open would let hold the lock for ever."""
    end = getattr(lock, "end_stuck_session", None)
    if end is None:
        return
    try:
        ended = within(CLEANUP_SECONDS, lambda: end(CLEANUP_SECONDS), "ending our session")
        log.warning("job %s: our stuck session %s", job, "ended" if ended else "was gone")
    except Exception as exc:  # no fresh connection either: `check` shows the holder
        log.warning("job %s: could not end our stuck session: %s", job, exc)


def cut_ledger_loose(ledger: Ledger) -> None:
    """Shut down the socket of the ledger's own write connection (if it has one open) without a
    word to the server: a write blocked on it returns with a connection error, and the ledger
    reconnects for its retry. A borrowed connection is the lock's: cut_loose cuts that one."""
    shut_socket(ledger.socket_fd())


DECIDE_SECONDS = 15.0  # the lock session's statement_timeout (10 s) and a margin: only a peer
# that never answers reaches it, never a server that is merely slow or waiting on a row lock


class Deadlines:
    """Calls in flight and when each is due; the thread that cuts an overdue one loose."""

    def __init__(self) -> None:
        self._forget()

    def _forget(self) -> None:
        """A fresh state (also in a forked child: the parent's watching thread is not there)."""
        self._due: dict[int, tuple[float, Callable[[], None]]] = {}
        self._tokens = itertools.count()
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)
        self._thread: threading.Thread | None = None
        self._wakes_at = 0.0  # when the watching thread wakes next (it is told of an earlier due)

    def arm(self, seconds: float, cut: Callable[[], None]) -> int:
        """From now, `cut()` runs (on a thread of its own) once `seconds` have passed, unless
        `disarm(token)` came first: call that in a `finally` (the run path's form of `bound`,
        without a generator per round trip)."""
        token = next(self._tokens)
        due = time.monotonic() + seconds
        with self._mutex:
            self._due[token] = (due, cut)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="lockconsole-deadlines", daemon=True
                )
                start_quiet(self._thread)
            if due < self._wakes_at or self._wakes_at == 0.0:
                # woken only for a due before its next wake: one per attempt cost the run path
                # two thread switches; a later due is found when it wakes
                self._wakes_at = due
                self._changed.notify()
        return token

    def disarm(self, token: int) -> None:
        """The call armed as `token` ended: no cut (unless one already started). One dict pop,
        atomic under the GIL: the watching thread reads a copy of the calls in flight."""
        self._due.pop(token, None)

    @contextmanager
    def bound(self, seconds: float, cut: Callable[[], None]) -> Iterator[None]:
        """Within the block, `cut()` runs (on a thread of its own) once `seconds` have passed."""
        token = self.arm(seconds, cut)
        try:
            yield
        finally:
            self.disarm(token)

    def _watch(self) -> None:
        while True:
            with self._changed:
                now = time.monotonic()
                in_flight = list(self._due.items())  # one C call: a disarm cannot cut across it
                cuts = []
                for token, (due, _) in in_flight:
                    if due <= now:
                        popped = self._due.pop(token, None)  # None: disarmed meanwhile
                        if popped is not None:
                            cuts.append(popped[1])
                if not cuts:
                    nearest = min((due for _, (due, _) in in_flight), default=now + 60)
                    self._wakes_at = max(now + 0.01, nearest)
                    self._changed.wait(self._wakes_at - now)
                    continue
            for cut in cuts:
                log.warning("a run-path statement got no answer in time: cutting it loose")
                start_quiet(threading.Thread(target=cut, name="lockconsole-cut", daemon=True))


DEADLINES = Deadlines()


def _forget_workers() -> None:
    """In a forked child: the parent's idle workers are not there (a call handed to one would
    never run and always be overdue), so within() starts its own."""
    global _IDLE_GUARD
    _IDLE_GUARD = threading.Lock()
    _IDLE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=DEADLINES._forget)
    os.register_at_fork(after_in_child=_forget_workers)
