"""How the Console waits on its databases: a time budget per snapshot and at most one
outstanding call per database, so a stopped or silent database never holds the others up
and hung threads never pile up.

Every console connection carries `Timeouts` (connect + statement, from [console]); on top
of that a snapshot waits at most `budget` seconds for a database. A database that was down
in the last snapshot is waited for only as long as the healthy ones take (at least GRACE):
its call keeps running and its answer, when it comes, is used by the next snapshot. While a
database's call is still running, no new one is started for it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Executor, Future, wait
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from lockconsole.backends.connect import Timeouts
from lockconsole.config.settings import ConsoleSettings

GRACE = 1.0  # seconds a snapshot waits for a database that was down in the last one
MARGIN = 1.0  # seconds over connect + statement timeout before a call counts as hung
T = TypeVar("T")


def timeouts_of(settings: ConsoleSettings) -> Timeouts:
    return Timeouts(
        connect=settings.connect_timeout.total_seconds(),
        statement=settings.statement_timeout.total_seconds(),
    )


def budget_of(settings: ConsoleSettings) -> float:
    """Seconds a snapshot waits for one database's answer before giving up on it."""
    limits = timeouts_of(settings)
    return limits.connect + limits.statement + MARGIN


@dataclass
class Call(Generic[T]):
    """One database read running in the pool."""

    future: Future[T]
    started: float = field(default_factory=time.monotonic)
    carried: bool = False  # started by an earlier snapshot that stopped waiting for it
    timed_out: bool = False  # ran past the budget (its own error is then beside the point)
    finished: float | None = None  # monotonic time its answer came

    def __post_init__(self) -> None:
        self.future.add_done_callback(self._done)

    def _done(self, _future: Future[T]) -> None:
        self.finished = time.monotonic()

    def took(self) -> float | None:
        """Seconds from start to answer; None while it runs."""
        return None if self.finished is None else self.finished - self.started

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Calls:
    """At most one outstanding call per key (a database, a lease table, a ledger)."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._open: dict[Hashable, Call[Any]] = {}  # key -> a call whose answer is not used yet

    def start(self, key: Hashable, fn: Callable[..., T], *args: Any) -> Call[T]:
        """A new call, or the one an earlier snapshot left behind (running or answered)."""
        with self._lock:
            call = self._open.get(key)
            if call is not None and not (call.timed_out and call.future.done()):
                call.carried = True
                return call
            started = self._open[key] = Call(self._pool.submit(fn, *args))
            return started

    def used(self, key: Hashable, call: Call[Any]) -> None:
        """The call's answer was used: the next snapshot starts a new one."""
        with self._lock:
            if self._open.get(key) is call:
                del self._open[key]

    def running(self) -> int:
        with self._lock:
            return sum(not c.future.done() for c in self._open.values())


def wait_for(calls: Iterable[tuple[Call[Any], bool]], budget: float) -> None:
    """Wait for (call, was_down) pairs: the healthy ones up to `budget` seconds, the rest up
    to when the healthy ones are done (at least GRACE after they started, never past it)."""
    started = time.monotonic()
    healthy: list[Future[Any]] = []
    others: list[Future[Any]] = []
    for call, was_down in calls:
        if call.carried:
            continue  # already waited for by an earlier snapshot
        (others if was_down else healthy).append(call.future)
    if healthy:
        wait(healthy, timeout=budget)
    if others:
        now = time.monotonic()
        until = min(started + budget, max(started + GRACE, now))
        wait(others, timeout=max(0.0, until - now))


def pending_text(call: Call[Any], budget: float, last_error: str | None) -> str:
    """What a database whose call has not answered yet shows."""
    waited = call.elapsed()
    from lockconsole.text.times import seconds

    if call.timed_out or waited >= budget:
        return f"no answer within {seconds(budget)}"
    text = (
        f"still waiting for the last answer ({seconds(int(waited))})"
        if call.carried
        else f"no answer yet ({seconds(int(waited))})"
    )
    return f"{text}; last error: {last_error}" if last_error else text
