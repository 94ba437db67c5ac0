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
from typing import Any

from lockconsole.backends.connect import Timeouts
from lockconsole.backends.inspect import Inspector
from lockconsole.config.settings import ConsoleSettings
from lockconsole.model.jobs import Database

GRACE = 1.0  # seconds a snapshot waits for a database that was down in the last one
MARGIN = 1.0  # seconds over connect + statement timeout before a call counts as hung


def timeouts_of(settings: ConsoleSettings) -> Timeouts:
    return Timeouts(connect=settings.connect_timeout.total_seconds(),
                    statement=settings.statement_timeout.total_seconds())  # fmt: skip


def budget_of(settings: ConsoleSettings) -> float:
    """Seconds a snapshot waits for one database's answer before giving up on it."""
    limits = timeouts_of(settings)
    return limits.connect + limits.statement + MARGIN


@dataclass
class Call:
    """One database read running in the pool."""

    future: Future[Any]
    started: float = field(default_factory=time.monotonic)
    carried: bool = False  # started by an earlier snapshot that stopped waiting for it
    timed_out: bool = False  # ran past the budget (its own error is then beside the point)

    def elapsed(self) -> float:
        return time.monotonic() - self.started


class Calls:
    """At most one outstanding call per key (a database, a lease table, a ledger)."""

    def __init__(self, pool: Executor) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._open: dict[Hashable, Call] = {}  # key -> a call whose answer is not used yet

    def start(self, key: Hashable, fn: Callable[..., Any], *args: Any) -> Call:
        """A new call, or the one an earlier snapshot left behind (running or answered)."""
        with self._lock:
            call = self._open.get(key)
            if call is not None and not (call.timed_out and call.future.done()):
                call.carried = True
                return call
            call = self._open[key] = Call(self._pool.submit(fn, *args))
            return call

    def used(self, key: Hashable, call: Call) -> None:
        """The call's answer was used: the next snapshot starts a new one."""
        with self._lock:
            if self._open.get(key) is call:
                del self._open[key]

    def running(self) -> int:
        with self._lock:
            return sum(not c.future.done() for c in self._open.values())


def wait_for(calls: Iterable[tuple[Call, bool]], budget: float) -> None:
    """Wait for (call, was_down) pairs: the healthy ones up to `budget` seconds, the rest up
    to when the healthy ones are done (at least GRACE after they started, never past it)."""
    started = time.monotonic()
    healthy, others = [], []
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


def pending_text(call: Call, budget: float, last_error: str | None) -> str:
    """What a database whose call has not answered yet shows."""
    waited = call.elapsed()
    if call.timed_out or waited >= budget:
        return f"no answer within {budget:g} s"
    text = (
        f"still waiting for the last answer ({waited:.0f} s)"
        if call.carried
        else f"no answer yet ({waited:.0f} s)"
    )
    return f"{text}; last error: {last_error}" if last_error else text


class WaitsMixin:
    """Console's handling of one database's answer, or of its absence."""

    _calls: Calls
    _lock: threading.Lock
    _ledgers: dict[str, Any]
    _inspectors: dict[tuple[str, str | None], Inspector]
    _last_errors: dict[str, str]

    def _error_text(self, db_name: str, exc: BaseException) -> str:
        raise NotImplementedError

    def _answer(self, key: tuple[Any, ...], call: Call, db_name: str, budget: float,
                errors: dict[str, str]) -> Any:  # fmt: skip
        """The call's result; or None, with the database's error (or wait) put in `errors`."""
        if not call.future.done():
            if not call.timed_out and call.elapsed() >= budget:
                call.timed_out = True
                self._give_up(key)
            text = pending_text(call, budget, self._last_errors.get(db_name))
            errors.setdefault(db_name, text)
            return None
        self._calls.used(key, call)
        exc = call.future.exception()
        if exc is None:
            return call.future.result()
        if call.timed_out:
            errors.setdefault(db_name, f"no answer within {budget:g} s")
        else:
            text = errors.setdefault(db_name, self._error_text(db_name, exc))
            self._last_errors[db_name] = text
        return None

    def _give_up(self, key: tuple[Any, ...]) -> None:
        """A read ran past its budget: end its statement if we can, reconnect next time."""
        with self._lock:
            if key[0] == "runs":
                self._ledgers.pop(key[1], None)  # its thread closes it when it ends
                return
            inspector = self._inspectors.pop(key[1:], None)
        abort = getattr(inspector, "abort", None)
        if abort is not None:
            abort()


def open_inspector(database: Database, table: str | None, timeouts: Timeouts) -> Inspector:
    if table is not None:
        from lockconsole.backends.lease.inspect import LeaseInspector

        return LeaseInspector(database, table, timeouts=timeouts)
    if database.url.dialect == "redis":
        from lockconsole.backends.redis.inspect import RedisInspector

        return RedisInspector(database, timeouts=timeouts)
    if database.url.dialect == "postgresql":
        from lockconsole.backends.postgres.inspect import PgInspector

        return PgInspector(database, timeouts=timeouts)
    from lockconsole.backends.mysql.inspect import MysqlInspector

    return MysqlInspector(database, timeouts=timeouts)
