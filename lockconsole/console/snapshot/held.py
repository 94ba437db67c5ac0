"""How long a lock has been held, as far as anyone can tell, and when a session is idle.

A database says when a lease row or a Redis key was taken and (MariaDB's METADATA_LOCK_INFO)
how long a user lock has been held; pg_locks says it for no granted lock (its `waitstart` is a
waiter's), and performance_schema neither. Where nothing says, `Sightings` keeps when this
console, or any sampler of the holder journal before it, first saw each holder (its key and its
session: pid and backend_start), and an idle
session bounds it too: it took its locks before its last statement ended. The lock is then held
*at least* since the earlier of the two (`held_from = "at_least"`); the session's start bounds it
the other way. A pool's keep-alive `select 1` moves neither forward, so FOR keeps growing and the
stale rule (`stale.py`) reads the same facts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from datetime import datetime
from typing import Any

from lockconsole.model.construct import fill, gc_paused, plain
from lockconsole.model.views import Holder

IDLE_COMMANDS = frozenset({"Sleep"})  # MySQL/MariaDB's command of a connection between statements

SeenKey = tuple[object, ...]
# first seen, bound, its backend_start, the stamp that last saw it (a list: updated in place)
Seen = list[Any]
FIRST, BOUND, START, ROUND = range(4)


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
    known to be held since (a bound once known stays: a later statement moves nothing).

    Each holder's entry is updated in place, so a holder seen again costs one lookup; the
    table is rebuilt only when some holder has gone (or a database could not be read)."""

    def __init__(self) -> None:
        self._first: dict[SeenKey, Seen] = {}
        self._round = 0
        self._lock = threading.Lock()

    def stamp(
        self,
        holders: Iterable[Holder],
        now: datetime,
        unread: Collection[str] = (),
        *,
        earliest: Callable[[tuple[object, ...]], datetime | None] | None = None,
    ) -> list[Holder]:
        """The holders with `first_seen`, and `held_since` / `held_from` as far as known.

        The holders must be this snapshot's own, as its reads built them: they are filled in
        place (`construct.fill`), not copied. Holders of databases that could not be read now
        (`unread`) are remembered as they were. A pid reused by a new session (another
        backend_start) is a new holder.
        """
        in_place = plain(Holder)  # fill()'s test, made once rather than per holder
        idle: dict[str | None, bool] = {}  # is_idle by state: a few states, 10,000 holders
        with self._lock, gc_paused():  # 10,000 small values: no collections on the way
            self._round += 1
            this = self._round
            first = self._first
            get = first.get
            live = 0  # entries seen by this stamp
            out: list[Holder] = []
            append = out.append
            for h in holders:
                d = h.__dict__
                if not d["granted"]:
                    append(h)
                    continue
                key = (d["database"], d["kind"], d["source"], d["key"], d["pid"], d["locked_by"])
                start = d["backend_start"]
                old = get(key)
                if old is None or old[START] != start:  # new, or a new session of a reused pid
                    if old is None or old[ROUND] != this:
                        live += 1
                    seen = now
                    if earliest is not None:  # the journal's identity: the session start inside
                        journal = earliest((*key[:5], start, key[5]))
                        if journal is not None and journal < now:
                            seen = journal
                    old = first[key] = [seen, seen, start, this]
                elif old[ROUND] != this:
                    old[ROUND] = this
                    live += 1
                given = d["held_since"]
                if given is not None:  # the database said when (or the transaction did)
                    xact = d["kind"] == "advisory" and given == d["xact_start"]
                    how = "transaction" if xact else "database"
                else:
                    state_since = d["state_since"]
                    if state_since is not None and state_since < old[BOUND]:
                        state = d["state"]
                        if (known := idle.get(state)) is None:
                            known = idle[state] = is_idle(state)
                        if known:  # an idle session took its locks before this
                            old[BOUND] = state_since
                    given, how = old[BOUND], "at_least"
                if in_place:
                    d["first_seen"], d["held_since"], d["held_from"] = old[FIRST], given, how
                    append(h)
                else:
                    append(
                        fill(h, {"first_seen": old[FIRST], "held_since": given, "held_from": how})
                    )
            if live != len(first):  # some holder has gone, or was not read
                self._first = {k: v for k, v in first.items() if v[ROUND] == this or k[0] in unread}
            return out
