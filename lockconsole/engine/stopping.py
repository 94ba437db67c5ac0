"""A sticky stop request: set once at any instant of an attempt, seen by every later step.

A stop can come from a signal handler, Scheduler.stop(), the console or the watchdog, at any
instant: before the connections exist, between acquiring and starting the job, while the child
starts. Whatever asks for a stop later (a Command, a callback) registers with on_request() and
is called at once if the stop was already requested, so no request is lost in a gap.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TypeAlias

from lockconsole.engine import faultpoints

if TYPE_CHECKING:
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
        self._set = False  # requested; the Event is made only when someone waits on it
        self._event: threading.Event | None = None
        self.reason: str | None = None
        self.signum: int | None = None  # the signal that asked, for the runner's exit code
        self._callbacks: list[Callable[[str], None]] = []
        self._interruptible = 0  # > 0 while the main thread is in an interruptible step
        self._mutex = threading.RLock()  # re-entrant: request() may run in a signal handler
        self.holding = False  # the attempt passed the gate into the steps that take the lock

    @property
    def event(self) -> threading.Event:
        """The request as an Event (to wait on, or pass as a stop flag), made on first use:
        most attempts never wait on their stop, and an Event costs as much as a statement's
        own Python work. Set whenever the request is."""
        event = self._event
        if event is None:
            with self._mutex:
                event = self._event
                if event is None:
                    event = self._event = threading.Event()
                    if self._set:  # read after the Event is in place (request() may run now)
                        event.set()
        return event

    def is_set(self) -> bool:
        """Requested; also when the Event was set directly (a job holding it as a stop flag)."""
        if self._set:
            return True
        event = self._event
        return event is not None and event.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        if self._set:
            return True
        return self.event.wait(timeout)

    def request(self, reason: str, signum: int | None = None) -> None:
        """Ask to stop; the first reason wins. Raises Stopped when called (by a signal handler)
        in the main thread while that thread is in a step that holds nothing (connecting),
        so that step ends now."""
        with self._mutex:
            first = not self._set
            if first:
                self.reason, self.signum = reason, signum
            self._set = True  # set before the callbacks are read (see on_request)
            if self._event is not None:
                self._event.set()
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
        if self._set:
            callback(self.reason or "stop requested")

    def check(self) -> None:
        """Raise Stopped if a stop was requested."""
        if self._set:
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

    def handler(signum: int, _frame: object) -> None:
        stop.request(f"stopped by {signal.Signals(signum).name}", signum)

    with handling((signal.SIGTERM, signal.SIGINT), handler):
        yield


def _swap_handler() -> Callable[[int, Any], Any]:
    """signal.signal without its enum round trip: the C function under it takes and gives back
    plain numbers and handlers (about 20x cheaper; the run path swaps eight per attempt). A
    handler given back as a number (SIG_DFL, SIG_IGN) compares equal to signal's constants."""
    swap: Callable[[int, Any], Any] = getattr(sys.modules.get("_signal"), "signal", signal.signal)
    return swap


_SWAP: list[Callable[[int, Any], Any]] = []  # _swap_handler(), looked up once


class holding_signals:  # noqa: N801 - used as `with holding_signals(stop):`
    """While inside (main thread only), SIGINT and SIGTERM are noted, not acted on; each also
    requests `stop`. On leaving, the handlers that were there get them, in order (Python's
    default SIGINT handler raises KeyboardInterrupt; a default SIGTERM is sent again).

    A class, not a generator: the run path enters one around begin and one around the finish,
    and a contextmanager's generator and closure cost more than the four handler swaps."""

    __slots__ = ("stop", "got", "previous")

    def __init__(self, stop: Stop | None = None) -> None:
        self.stop = stop
        self.got: list[int] = []  # made here: a handler that made it could race a nested one
        self.previous: dict[int, _Handler] | None = None  # None: not swapped (not main thread)

    def __enter__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        swap = _SWAP[0] if _SWAP else _remember_swap()
        previous: dict[int, _Handler] = {}
        self.previous = previous  # in place before a handler can run (it reads it)
        handler = self._noted
        previous[_SIGINT] = swap(_SIGINT, handler)
        previous[_SIGTERM] = swap(_SIGTERM, handler)

    def _noted(self, signum: int, _frame: object) -> None:
        self.got.append(signum)
        previous = self.previous
        if self.stop is not None and (previous is None or previous.get(signum) != _SIG_IGN):
            self.stop.request(f"interrupted by {signal.Signals(signum).name}", signum)

    def __exit__(self, *exc: object) -> None:
        previous = self.previous
        if previous is None:
            return
        swap = _SWAP[0]
        for signum, h in previous.items():
            swap(signum, h)
        if self.got:
            _deliver(self.got, previous)


def _remember_swap() -> Callable[[int, Any], Any]:
    swap = _swap_handler()
    _SWAP[:] = [swap]
    return swap


def _deliver(got: list[int], previous: dict[int, _Handler]) -> None:
    """Hand the signals noted while held to the handlers that were there, in order."""
    import os

    for signum in got:
        earlier = previous[signum]
        if callable(earlier):
            earlier(signum, None)
        elif earlier == _SIG_DFL:
            os.kill(os.getpid(), signum)


# plain numbers: what the C function gives back compares equal to them without the enums
_SIGINT, _SIGTERM = int(signal.SIGINT), int(signal.SIGTERM)
_SIG_DFL, _SIG_IGN = int(signal.SIG_DFL), int(signal.SIG_IGN)
