"""The database server's clock: the one clock for every time the ledger stores or compares.

An instance's own clock fires its schedule (and names the slot); every ledger timestamp
(`started_at`, `finished_at`, a pause's start and end, a request's expiry) and every comparison
with one is the server's time instead, so an instance whose clock runs minutes ahead neither
expires the fleet's requests nor runs a paused job, and the ledger's order is the real order.

The server's time is read once per server and process (one statement, on the ledger's own
connection) and carried forward by this host's monotonic clock, which a step of the wall clock
does not move; it is read again after `REREAD` seconds. The error is half a round trip plus the
monotonic clock's drift (parts per million). The same reading gives this instance's offset, the
local wall clock minus the server's, which each attempt records (`clock_offset_ms`) so `check`,
the console and the metrics can name an instance whose clock is off.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

REREAD = 3600.0  # seconds a reading is carried forward before the server is asked again


class _Asks(Protocol):
    """The part of Ledger a reading needs: its dialect, its URL and the server's time."""

    dialect: str
    url: Any

    def server_time(self) -> Any: ...


@dataclass(frozen=True)
class Reading:
    """The server's time at one moment of this host's monotonic clock, and the wall clock's."""

    server: datetime
    monotonic: float
    offset: float  # seconds: this host's wall clock minus the server's, at the reading

    def now(self) -> datetime:
        return self.server + timedelta(seconds=time.monotonic() - self.monotonic)


_READINGS: dict[tuple[Any, ...], Reading] = {}
_GUARD = threading.Lock()


def _server_key(ledger: _Asks) -> tuple[Any, ...]:
    key: tuple[Any, ...] | None = getattr(ledger, "clock_key", None)  # a Ledger keeps its own
    if key is None:
        url = ledger.url
        key = (ledger.dialect, url.host, url.port, url.database)
    return key


def server_key(dialect: str, url: Any) -> tuple[Any, ...]:
    """Which server a reading is of (a Ledger computes it once, as its `clock_key`)."""
    return (dialect, url.host, url.port, url.database)


def read(ledger: _Asks, ask: Callable[[], Any] | None = None) -> Reading:
    """A fresh reading of the server's clock through `ledger`, or `ask` (a lock's connection to
    the same server, so no connection is opened for it); SQLite: this host's clock."""
    before_mono, before_wall = time.monotonic(), time.time()
    if ledger.dialect == "sqlite":  # the file's clock is this host's
        return Reading(datetime.now(UTC), before_mono, 0.0)
    server = (ask or ledger.server_time)()
    after_mono, after_wall = time.monotonic(), time.time()
    if isinstance(server, str):
        server = datetime.fromisoformat(server)
    if server.tzinfo is None:  # MySQL's UTC_TIMESTAMP(6) is naive UTC
        server = server.replace(tzinfo=UTC)
    server = server.astimezone(UTC)
    middle_wall = (before_wall + after_wall) / 2
    return Reading(server, (before_mono + after_mono) / 2, middle_wall - server.timestamp())


def reading(ledger: _Asks, ask: Callable[[], Any] | None = None) -> Reading:
    """This process's reading of the ledger server's clock: taken on first use, then kept.

    A re-reading that fails keeps the old one (it is still right within the drift), so a
    server that went away after the first reading never stops a finish from being stamped.
    """
    key = _server_key(ledger)
    found = _READINGS.get(key)  # one dict read, atomic under the GIL: no lock for it
    if found is not None and time.monotonic() - found.monotonic < REREAD:
        return found
    try:
        fresh = read(ledger, ask)
    except Exception:
        if found is None:
            raise
        return found
    with _GUARD:
        _READINGS[key] = fresh
    return fresh


def now(ledger: _Asks) -> datetime:
    """reading(ledger).now() in one step: the server's clock as last read plus the monotonic
    time since (the run path asks it twice an attempt)."""
    found = _READINGS.get(_server_key(ledger))
    if found is not None:
        elapsed = time.monotonic() - found.monotonic
        if elapsed < REREAD:
            return found.server + timedelta(seconds=elapsed)
    return reading(ledger).now()


def known(ledger: _Asks) -> Reading | None:
    """The reading this process already took of the ledger server's clock, without asking it."""
    with _GUARD:
        return _READINGS.get(_server_key(ledger))


def known_offset(ledger: _Asks) -> float | None:
    """This instance's offset from the ledger server's clock, if a reading was taken."""
    with _GUARD:
        found = _READINGS.get(_server_key(ledger))
    return None if found is None else found.offset


def forget() -> None:
    """Drop every reading (tests; a process that knows its clock was stepped)."""
    with _GUARD:
        _READINGS.clear()
