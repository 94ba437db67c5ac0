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

from lockconsole.model.fast import fill, gc_paused
from lockconsole.model.views import Holder

IDLE_COMMANDS = frozenset({"Sleep"})  # MySQL/MariaDB's command of a connection between statements

SeenKey = tuple[object, ...]
Seen = tuple[datetime, datetime, datetime | None]  # first seen, bound, its backend_start


def is_idle(state: str | None) -> bool:
    """Whether a session is between statements: PostgreSQL's idle states, MySQL's Sleep."""
    if not state:
        return False
    return state.startswith("idle") or state.split(" ", 1)[0] in IDLE_COMMANDS


def seen_key(holder: Holder) -> SeenKey:
    """One holder of one lock (its session's backend_start is compared apart: cheaper)."""
    h = holder
    return (h.database, h.kind, h.source, h.key, h.pid, h.locked_by)


class Sightings:
    """When this console first saw each granted holder, and the earliest time its lock is
    known to be held since (a bound once known stays: a later statement moves nothing)."""

    def __init__(self) -> None:
        self._first: dict[SeenKey, Seen] = {}
        self._lock = threading.Lock()

    def stamp(
        self, holders: Iterable[Holder], now: datetime, unread: Collection[str] = ()
    ) -> list[Holder]:
        """The holders with `first_seen`, and `held_since` / `held_from` as far as known.

        The holders must be this snapshot's own, as its reads built them: they are filled in
        place (`fast.fill`), not copied. Holders of databases that could not be read now
        (`unread`) are remembered as they were. A pid reused by a new session (another
        backend_start) is a new holder.
        """
        with self._lock, gc_paused():  # 10,000 small values: no collections on the way
            first = self._first
            seen: dict[SeenKey, Seen] = {}
            out: list[Holder] = []
            append = out.append
            for h in holders:
                d = h.__dict__
                if not d["granted"]:
                    append(h)
                    continue
                key = (d["database"], d["kind"], d["source"], d["key"], d["pid"], d["locked_by"])
                start = d["backend_start"]
                old = first.get(key)
                if old is None or old[2] != start:
                    old = (now, now, start)
                since, bound = old[0], old[1]
                given = d["held_since"]
                if given is not None:  # the database said when (or the transaction did)
                    seen[key] = old
                    xact = d["kind"] == "advisory" and given == d["xact_start"]
                    how = "transaction" if xact else "database"
                    append(fill(h, {"first_seen": since, "held_from": how}))
                    continue
                state_since = d["state_since"]
                if state_since is not None and state_since < bound and is_idle(d["state"]):
                    bound = state_since  # an idle session took its locks before this
                    old = (since, bound, start)
                seen[key] = old
                append(fill(h, {"first_seen": since, "held_since": bound, "held_from": "at_least"}))
            if unread:
                seen = {k: v for k, v in first.items() if k[0] in unread} | seen
            self._first = seen
            return out
