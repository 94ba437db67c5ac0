"""Lock sessions kept between attempts in one process (`run_once`, `lockconsole schedule`).

An attempt needs a lock connection and a ledger connection (whose own connection stays
unopened where the attempt's statements merge onto the lock's). Opening them per attempt costs
more than the attempt's own two to six round trips; a process that makes many attempts keeps
them here instead, keyed by everything that decides the lock (job, strategy, key, databases,
instance). Entries are taken, not shared: one attempt uses a session at a time, then gives it back.

A session goes back only when its lock was released cleanly and both connections are healthy and
idle: never while it holds a lock (a pooled session lock would be "re-acquired" by the next user: a
pool's reset-on-return ROLLBACK keeps it), never after a lost lock or an error, never inside a
transaction. Anything else is closed. A forked child forgets its parent's sessions (it must not talk
on their sockets); the process closes the rest at exit. `lockconsole run` (one attempt per process)
keeps none.
"""

from __future__ import annotations

import atexit
import os
import threading
from dataclasses import dataclass
from typing import Any

from lockconsole.backends import Lock
from lockconsole.backends.ledger.store import Ledger
from lockconsole.model.jobs import Database, Job

IDLE_PER_KEY = 1  # idle sessions kept per key; more (overlapping attempts) are closed


@dataclass
class Session:
    """An open lock and ledger for one key, holding no lock while it is idle."""

    key: tuple[Any, ...]
    lock: Lock
    ledger: Ledger

    def close(self) -> None:
        """Close both connections (session locks die with theirs); never raises."""
        try:
            self.lock.close()
        except Exception:
            pass
        try:
            self.ledger.close()
        except Exception:
            pass

    def reusable(self) -> bool:
        """True when the lock is released, nothing was lost and both connections are idle."""
        try:
            return self.lock.reusable() and self.ledger.reusable()
        except Exception:
            return False


def session_key(job: Job, database: Database, ledger_database: Database, instance: str) -> tuple:
    """Everything that decides which lock a session takes and where it records."""
    return (
        job.name,
        job.strategy,
        job.key.kind,
        str(job.key),
        job.lease_table,
        job.allow_pooler,
        job.redis_prefix,
        database.url.raw,
        ledger_database.url.raw,
        instance,
    )


class SessionRegistry:
    """Idle sessions by key; take() hands one out (or None), put() takes it back or closes it."""

    def __init__(self, idle_per_key: int = IDLE_PER_KEY) -> None:
        self.idle_per_key = idle_per_key
        self._idle: dict[tuple[Any, ...], list[Session]] = {}
        self._mutex = threading.Lock()

    def take(self, key: tuple[Any, ...]) -> Session | None:
        with self._mutex:
            idle = self._idle.get(key)
            return idle.pop() if idle else None

    def put(self, session: Session) -> bool:
        """Keep `session` for the next attempt if it is reusable (else close it); True if kept."""
        if session.reusable():
            with self._mutex:
                idle = self._idle.setdefault(session.key, [])
                if len(idle) < self.idle_per_key:
                    idle.append(session)
                    return True
        session.close()
        return False

    def close_all(self) -> None:
        """Close every idle session (at exit, or when a scheduler stops)."""
        with self._mutex:
            sessions = [s for idle in self._idle.values() for s in idle]
            self._idle.clear()
        for session in sessions:
            session.close()

    def __len__(self) -> int:
        with self._mutex:
            return sum(len(idle) for idle in self._idle.values())

    def _forget(self) -> None:
        """In a forked child: drop the parent's sessions without touching their sockets."""
        self._mutex = threading.Lock()
        _ORPHANS.extend(s for idle in self._idle.values() for s in idle)
        self._idle = {}


_ORPHANS: list[Session] = []  # a parent's sessions in a forked child: kept, never closed
REGISTRY = SessionRegistry()  # the process's registry, used by run_once by default
atexit.register(REGISTRY.close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=REGISTRY._forget)


def give_back(
    sessions: SessionRegistry | None,
    key: tuple[Any, ...],
    lock: Lock,
    ledger: Ledger,
    *,
    keep: bool,
) -> None:
    """Return the connections to `sessions` when `keep` and they are fit, else close them."""
    session = Session(key, lock, ledger)
    if sessions is not None and keep:
        sessions.put(session)
    else:
        session.close()
