"""A sticky stop request: set once at any instant of an attempt, seen by every later step.

A stop can come from a signal handler, Scheduler.stop(), the console or the watchdog, at any
instant: before the connections exist, between acquiring and starting the job, while the child
starts. Whatever asks for a stop later (a Command, a callback) registers with on_request() and
is called at once if the stop was already requested, so no request is lost in a gap.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

from lockconsole.engine import faultpoints

if TYPE_CHECKING:
    import signal
    from types import FrameType

    # what signal.signal() takes and gives back
    _Handler: TypeAlias = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class Stopped(BaseException):
    """The attempt was stopped before it held the lock: nothing ran and nothing is held.

    A BaseException, like KeyboardInterrupt, so `except Exception` in a job does not eat it.
    """


class Stop:
    """One stop request per attempt (or per scheduler): `request(reason)` sets it, for good."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason: str | None = None
        self.signum: int | None = None  # the signal that asked, for the runner's exit code
        self._callbacks: list[Callable[[str], None]] = []
        self._interruptible = 0  # > 0 while the main thread is in an interruptible step
        self._mutex = threading.RLock()  # re-entrant: request() may run in a signal handler
        self.holding = False  # the attempt passed the gate into the steps that take the lock

    def is_set(self) -> bool:
        return self.event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        return self.event.wait(timeout)

    def request(self, reason: str, signum: int | None = None) -> None:
        """Ask to stop; the first reason wins. Raises Stopped when called (by a signal handler)
        in the main thread while that thread is in a step that holds nothing (connecting),
        so that step ends now."""
        with self._mutex:
            first = not self.event.is_set()
            if first:
                self.reason, self.signum = reason, signum
            self.event.set()  # set before the callbacks are read (see on_request)
        for callback in list(self._callbacks):
            callback(self.reason or reason)
        if first:
            faultpoints.reach(faultpoints.STOP_REQUESTED)
        if self._interruptible and threading.current_thread() is threading.main_thread():
            raise Stopped(self.reason or reason)

    def on_request(self, callback: Callable[[str], None]) -> None:
        """Call `callback(reason)` when a stop is requested, or now if it already was.

        Appended before the flag is read, and request() sets the flag before it reads the
        list, so whatever the interleaving the callback runs at least once (callbacks must
        be idempotent).
        """
        self._callbacks.append(callback)
        if self.event.is_set():
            callback(self.reason or "stop requested")

    def check(self) -> None:
        """Raise Stopped if a stop was requested."""
        if self.event.is_set():
            raise Stopped(self.reason or "stop requested")

    def enter_holding(self) -> None:
        """Pass the gate into the steps that may take or hold the lock, or raise Stopped.

        Atomic with request(): once a stop was requested nobody passes, so whoever stops an
        attempt that is not `holding` knows it never will hold anything and need not wait.
        """
        with self._mutex:
            self.check()
            self.holding = True

    @contextmanager
    def interruptible(self) -> Iterator[None]:
        """Inside, in the main thread, a request made by a signal handler raises Stopped."""
        self.check()
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        self._interruptible += 1
        try:
            yield
        finally:
            self._interruptible -= 1


@contextmanager
def handling(signals: Sequence[int], handler: Callable[[int, object], None]) -> Iterator[None]:
    """`handler` gets `signals` while inside, the handlers that were there get them back after
    (main thread only, where Python runs signal handlers; elsewhere a no-op)."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in signals}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


@contextmanager
def on_signals(stop: Stop) -> Iterator[None]:
    """SIGTERM and SIGINT request `stop` while inside (main thread only; else a no-op)."""
    import signal

    def handler(signum: int, _frame: object) -> None:
        stop.request(f"stopped by {signal.Signals(signum).name}", signum)

    with handling((signal.SIGTERM, signal.SIGINT), handler):
        yield


def _swap_handler() -> Callable[[int, Any], Any]:
    """signal.signal without its enum round trip: the C function under it takes and gives back
    plain numbers and handlers (about 20x cheaper; the run path swaps four per attempt). A
    handler given back as a number (SIG_DFL, SIG_IGN) compares equal to signal's constants."""
    import signal

    swap: Callable[[int, Any], Any] = getattr(sys.modules.get("_signal"), "signal", signal.signal)
    return swap


@contextmanager
def holding_signals(stop: Stop | None = None) -> Iterator[None]:
    """While inside (main thread only), SIGINT and SIGTERM are noted, not acted on; each also
    requests `stop`. On leaving, the handlers that were there get them, in order (Python's
    default SIGINT handler raises KeyboardInterrupt; a default SIGTERM is sent again)."""
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []
    previous: dict[int, _Handler] = {}

    def handler(signum: int, _frame: object) -> None:
        got.append(signum)
        if stop is not None and previous.get(signum) != signal.SIG_IGN:
            stop.request(f"interrupted by {signal.Signals(signum).name}", signum)

    swap = _swap_handler()
    for s in (signal.SIGINT, signal.SIGTERM):
        previous[s] = swap(s, handler)
    try:
        yield
    finally:
        for signum, h in previous.items():
            swap(signum, h)
        for signum in got:
            earlier = previous[signum]
            if callable(earlier):
                earlier(signum, None)
            elif earlier == signal.SIG_DFL:
                os.kill(os.getpid(), signum)
