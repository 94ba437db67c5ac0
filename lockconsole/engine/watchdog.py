"""Watchdog threads: each running attempt's lock is checked every `interval` seconds.

Once an attempt has run for `interval`, its checks run on a watchdog thread of its own, so a
check that hangs on one database never delays another job's check. Waking a thread costs more
than a lock round trip (it competes for the GIL with the job's own statements), and most
attempts that an app makes in a loop end long before their first check, so nothing wakes at
the start of an attempt: the watch is only noted, and one ticker thread per process, ticking
every quarter of the shortest interval while attempts come and go, hands each watch that
comes due to an idle watchdog thread (or starts one). The first check of a watch therefore
comes between `interval` and 1.25 × `interval` after it started, the later ones every
`interval`. Threads idle for IDLE_SECONDS end by themselves.

    watch = WATCHDOGS.watch(interval, check=lock.still_held, on_lost=lost, fd=lock_socket)
    ...                      # the job runs; `lost()` is called once if a check returns False
    watch.stop()             # returns when no check is running: the lock may be released now

With `fd` (the lock connection's socket), the watch is also armed at once and handed to the
socket watcher (`sockwatch`): when the socket turns readable or hangs up, the same check runs
at once on that thread, so a terminated session is noticed in milliseconds; the periodic
checks remain as the backstop.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from lockconsole.backends.threads import start_quiet
from lockconsole.engine.sockwatch import SOCKETS

IDLE_SECONDS = 60.0  # idle watchdog threads (and the ticker) wait this long for work, then end
MAX_IDLE = 4  # idle watchdog threads kept per process
MIN_TICK = 0.01  # seconds: the ticker never ticks faster than this
log = logging.getLogger(__name__)


class Watch:
    """One attempt's watch: `check()` every `interval` s until stop(); `on_lost()` on a False."""

    def __init__(
        self,
        pool: WatchdogPool,
        interval: float,
        check: Callable[[], bool],
        on_lost: Callable[[], None],
        fd: int | None = None,
    ) -> None:
        self.pool = pool
        self.fd = fd  # the lock connection's socket, watched by SOCKETS while this watch runs
        self.fired = False  # on_lost was called (by a periodic check or a socket event)
        self.interval = interval
        self.check = check
        self.on_lost = on_lost
        self.due = time.monotonic() + interval  # the first check
        self.halted = False  # stop() was called: no check starts after it
        # made once the watch is handed out (by the ticker when it comes due, most attempts end
        # before; a socket's watch at once): held while a check (and its on_lost) runs
        self._busy: threading.RLock | None = None
        # made only for the periodic loop (a watchdog thread waits on it between checks): set
        # by stop(). An Event per attempt cost the run path as much as a statement's own Python
        self.stopped: threading.Event | None = None

    def stop(self) -> None:
        """Stop watching; returns once no check or on_lost is running (safe from on_lost too)."""
        if self.fd is not None:
            SOCKETS.remove(self.fd, self)
        self.halted = True
        if not self.pool.forget_watch(self):
            return  # never handed out: no thread has it
        # forget_watch took it from the ticker: whether it has a `stopped` Event is settled
        if self.stopped is not None:
            self.stopped.set()
        assert self._busy is not None
        with self._busy:
            pass

    def came_due(self, *, periodic: bool = True) -> None:
        """The watch came due (`periodic`: its loop runs on a watchdog thread), or watches a
        socket (under the pool's lock): make what those need."""
        if self._busy is None:
            self._busy = threading.RLock()
        if periodic and self.stopped is None:
            self.stopped = threading.Event()
            if self.halted:
                self.stopped.set()

    def _verdict(self) -> bool:
        """Run the check (holding _busy); on a loss call on_lost once. True while held."""
        if self.halted or self.fired:
            return False
        try:
            held = self.check()
        except Exception as exc:  # a watchdog never dies silently: a failed check is a loss
            log.debug("watchdog check failed: %s", exc)
            held = False
        if not held and not self.halted:
            self.fired = True
            self.on_lost()
        return held

    def poke(self) -> bool:
        """The socket turned readable: check now. True to keep watching the socket.

        If a check is running right now, its answer covers this event (the event may be that
        check's own reply), so no second check is made.
        """
        assert self._busy is not None
        if not self._busy.acquire(blocking=False):
            with self._busy:
                return not (self.fired or self.halted)
        try:
            return self._verdict()
        finally:
            self._busy.release()

    def run(self) -> None:
        """The watch loop on its watchdog thread: check now, then every interval, until stopped
        or the lock is gone."""
        assert self.stopped is not None and self._busy is not None
        while True:
            with self._busy:
                if not self._verdict():
                    return
            if self.stopped.wait(self.interval):
                return


class _Worker:
    """A watchdog thread that runs one watch after another, handed over by its pool."""

    def __init__(self, pool: WatchdogPool, watch: Watch) -> None:
        self.pool = pool
        self.watch: Watch | None = watch
        self.assigned = threading.Event()
        self.assigned.set()
        self.thread = threading.Thread(target=self._loop, name="lockconsole-watchdog", daemon=True)

    def _loop(self) -> None:
        while True:
            if not self.assigned.wait(self.pool.idle_seconds):
                if self.pool.may_retire(self):
                    return
                continue  # handed a watch just as it timed out
            self.assigned.clear()
            watch, self.watch = self.watch, None
            if watch is not None:
                watch.run()
            if not self.pool.keep_idle(self):
                return


class WatchdogPool:
    """Notes new watches, and hands each one that comes due to a watchdog thread of its own."""

    _mutex: threading.Lock
    _idle: list[_Worker]
    _ticking: threading.Condition
    _tick_lock: threading.Lock  # the Condition's own lock: taken directly on the run path
    _pending: dict[int, Watch]
    _ticker: threading.Thread | None
    _tick: float
    _next_wake: float
    _last_watch: float
    started: int  # watchdog threads this pool has started (for tests and diagnostics)

    def __init__(self, max_idle: int = MAX_IDLE, idle_seconds: float = IDLE_SECONDS) -> None:
        self.max_idle = max_idle
        self.idle_seconds = idle_seconds
        self._forget()

    def watch(
        self,
        interval: float,
        *,
        check: Callable[[], bool],
        on_lost: Callable[[], None],
        fd: int | None = None,
    ) -> Watch:
        """Start watching: `check` runs every `interval` seconds, the first time after about
        `interval` seconds (at most a quarter more), and at once whenever `fd` turns readable."""
        watch = Watch(self, interval, check, on_lost, fd)
        tick = max(MIN_TICK, interval / 4)
        start = False
        with self._tick_lock:  # _ticking's lock (its Python-level __enter__ skipped)
            if fd is not None:
                watch.came_due(periodic=False)
            self._pending[id(watch)] = watch
            self._last_watch = time.monotonic()
            ticker = self._ticker
            if ticker is None:
                self._tick, start = tick, True
                ticker = self._ticker = threading.Thread(
                    target=self._tick_loop, name="lockconsole-watchdog-ticker", daemon=True
                )
            elif tick < self._tick or watch.due < self._next_wake:
                self._tick = min(self._tick, tick)
                self._ticking.notify()
        if start:
            start_quiet(ticker)
        if fd is not None and not SOCKETS.add(fd, watch):
            watch.fd = None
        return watch

    def idle(self) -> int:
        """How many watchdog threads wait for a watch."""
        with self._mutex:
            return len(self._idle)

    def forget_watch(self, watch: Watch) -> bool:
        """A watch stops: the ticker will not hand it out; True if it already did."""
        with self._tick_lock:
            self._pending.pop(id(watch), None)
            return watch._busy is not None

    def _tick_loop(self) -> None:
        while True:
            with self._ticking:
                now = time.monotonic()
                due = [w for w in self._pending.values() if w.due <= now]
                for w in due:
                    del self._pending[id(w)]
                    w.came_due()
                if not due:
                    if not self._pending and now - self._last_watch > self.idle_seconds:
                        self._ticker = None
                        return
                    first = min((w.due for w in self._pending.values()), default=now + self._tick)
                    self._next_wake = min(now + self._tick, first)
                    self._ticking.wait(self._next_wake - now)
                    continue
            for watch in due:
                self._dispatch(watch)

    def _dispatch(self, watch: Watch) -> None:
        """Run `watch` on an idle watchdog thread, or on a new one."""
        with self._mutex:
            worker = self._idle.pop() if self._idle else None
            if worker is not None:
                worker.watch = watch
                worker.assigned.set()
                return
            self.started += 1
        start_quiet(_Worker(self, watch).thread)

    def keep_idle(self, worker: _Worker) -> bool:
        """A worker finished its watch: keep it idle (True) or let it end (False)."""
        with self._mutex:
            if len(self._idle) >= self.max_idle:
                return False
            self._idle.append(worker)
            return True

    def may_retire(self, worker: _Worker) -> bool:
        """An idle worker timed out: True if it may end (it was not handed a watch meanwhile)."""
        with self._mutex:
            if worker.assigned.is_set():
                return False
            if worker in self._idle:
                self._idle.remove(worker)
            return True

    def _forget(self) -> None:
        """A fresh state (also in a forked child, where the parent's threads do not exist)."""
        self._mutex = threading.Lock()  # the idle workers
        self._idle = []
        self._tick_lock = threading.Lock()
        self._ticking = threading.Condition(self._tick_lock)  # the ticker and the watches not due
        self._pending = {}
        self._ticker = None
        self._tick = MIN_TICK
        self._next_wake = 0.0
        self._last_watch = 0.0
        self.started = 0


WATCHDOGS = WatchdogPool()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCHDOGS._forget)
