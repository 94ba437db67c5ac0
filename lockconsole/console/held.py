"""How long a lock has been held, as far as anyone can tell, and when a session is idle.

A database says when a lease row or a Redis key was taken and (MariaDB's METADATA_LOCK_INFO)
how long a user lock has been held; pg_locks says it for no granted lock (its `waitstart` is a
waiter's), and performance_schema neither. Where nothing says, `Sightings` keeps when this
console first saw each holder (its key and its session: pid and backend_start), and an idle
session bounds it too: it took its locks before its last statement ended. The lock is then held
*at least* since the earlier of the two (`held_from = "at_least"`); the session's start bounds it
the other way. A pool's keep-alive `select 1` moves neither forward, so FOR keeps growing and the
stale rule (`stale.py`) reads the same facts.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable
from datetime import datetime

from lockconsole.model.fast import evolve
from lockconsole.model.views import Holder

IDLE_COMMANDS = frozenset({"Sleep"})  # MySQL/MariaDB's command of a connection between statements

SeenKey = tuple[object, ...]


def is_idle(state: str | None) -> bool:
    """Whether a session is between statements: PostgreSQL's idle states, MySQL's Sleep."""
    if not state:
        return False
    return state.startswith("idle") or state.split(" ", 1)[0] in IDLE_COMMANDS


def seen_key(holder: Holder) -> SeenKey:
    """One holder of one lock in one session (a reused pid has another backend_start)."""
    h = holder
    return (h.database, h.kind, h.source, h.key, h.pid, h.backend_start, h.locked_by)


class Sightings:
    """When this console first saw each granted holder, and the earliest time its lock is
    known to be held since (a bound once known stays: a later statement moves nothing)."""

    def __init__(self) -> None:
        self._first: dict[SeenKey, tuple[datetime, datetime]] = {}  # (first seen, bound)
        self._lock = threading.Lock()

    def stamp(
        self, holders: Iterable[Holder], now: datetime, unread: Collection[str] = ()
    ) -> list[Holder]:
        """The holders with `first_seen`, and `held_since` / `held_from` as far as known.

        Holders of databases that could not be read now (`unread`) are remembered as they were.
        """
        with self._lock:
            first = self._first
            seen: dict[SeenKey, tuple[datetime, datetime]] = {}
            out: list[Holder] = []
            for h in holders:
                if not h.granted:
                    out.append(h)
                    continue
                key = seen_key(h)
                since, bound = first.get(key, (now, now))
                if h.held_since is not None:  # the database said when (or the transaction)
                    seen[key] = (since, bound)
                    xact = h.kind == "advisory" and h.held_since == h.xact_start
                    held_from = "transaction" if xact else "database"
                    out.append(evolve(h, first_seen=since, held_from=held_from))
                    continue
                if is_idle(h.state) and h.state_since is not None and h.state_since < bound:
                    bound = h.state_since  # an idle session took its locks before this
                seen[key] = (since, bound)
                out.append(evolve(h, first_seen=since, held_since=bound, held_from="at_least"))
            kept = {k: v for k, v in first.items() if k[0] in unread}
            self._first = kept | seen
            return out
