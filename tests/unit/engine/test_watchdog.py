"""Watchdog threads: a thread per watch that came due, reused between attempts; nothing wakes
for a watch stopped before its first check; stop() waits for a running check.

Threads are counted by the pool under test (`pool.started`), never process-wide: other tests'
threads come and go. "Nothing happened" is checked after a later watch was seen to run, so the
ticker has provably passed the instant at which the thing would have happened.
"""

from __future__ import annotations

import threading
import time
from functools import partial

from lockconsole.engine.watchdog import WatchdogPool

from tests.support.helpers import DEADLINE, eventually

_wait_for = partial(eventually, interval=0.005)


def _ticked_past(pool: WatchdogPool, interval: float) -> None:
    """Return once a watch started now has had its first check: every watch of `interval`
    noted before it has come due and been handed out (or dropped) by the ticker."""
    checked = threading.Event()
    sentinel = pool.watch(interval, check=lambda: checked.set() or True, on_lost=lambda: None)
    assert checked.wait(DEADLINE), "the ticker handed out a watch that came due"
    sentinel.stop()


def test_a_false_check_calls_on_lost_once_and_the_thread_is_reused() -> None:
    pool = WatchdogPool()
    lost = threading.Event()
    calls: list[str] = []
    watch = pool.watch(0.01, check=lambda: calls.append("check") or False, on_lost=lost.set)
    assert lost.wait(DEADLINE)
    assert calls == ["check"]
    assert _wait_for(lambda: pool.idle() == 1)
    assert pool.started == 1
    watch.stop()
    checked = threading.Event()
    second = pool.watch(0.01, check=lambda: checked.set() or True, on_lost=lost.clear)
    assert checked.wait(DEADLINE)
    assert pool.idle() == 0  # the idle thread took the new watch: no thread was started
    assert pool.started == 1
    second.stop()
    assert lost.is_set()  # a held lock never calls on_lost
    assert _wait_for(lambda: pool.idle() == 1)


def test_the_first_check_comes_after_the_interval_and_later_ones_every_interval() -> None:
    pool = WatchdogPool()
    started = time.monotonic()
    checks: list[float] = []
    watch = pool.watch(
        0.2, check=lambda: checks.append(time.monotonic()) or True, on_lost=lambda: None
    )
    assert _wait_for(lambda: len(checks) >= 3)
    watch.stop()
    assert checks[0] - started >= 0.2  # never before the interval (no upper bound: load varies)
    assert all(b - a >= 0.19 for a, b in zip(checks, checks[1:], strict=False))


def test_a_watch_stopped_before_its_first_check_wakes_no_thread() -> None:
    pool = WatchdogPool()
    warm = pool.watch(0.05, check=lambda: True, on_lost=lambda: None)
    warm.stop()  # the ticker now runs
    checks: list[int] = []
    for _ in range(200):
        pool.watch(0.05, check=lambda: checks.append(1) or True, on_lost=lambda: None).stop()
    _ticked_past(pool, 0.05)  # the 200 stopped watches were due before this one
    assert checks == []
    assert pool.started == 1, "only the sentinel's check woke a thread"


def test_stop_waits_for_a_running_check() -> None:
    pool = WatchdogPool()
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_check() -> bool:
        inside.set()
        release.wait(DEADLINE)
        done.set()
        return True

    watch = pool.watch(0.01, check=slow_check, on_lost=lambda: None)
    assert inside.wait(DEADLINE)
    returned: list[bool] = []
    stopper = threading.Thread(target=lambda: returned.append(watch.stop() is None))
    stopper.start()
    stopper.join(0.1)
    assert not returned  # stop() waits while the check runs
    release.set()
    stopper.join(DEADLINE)
    assert returned and done.is_set()  # stop() returned only after the check finished


def test_stop_from_on_lost_does_not_deadlock_and_errors_count_as_lost() -> None:
    pool = WatchdogPool()
    stopped, registered = threading.Event(), threading.Event()
    holder: list = []

    def on_lost() -> None:
        # the check may come due before watch() has returned to the test (a busy machine)
        assert registered.wait(DEADLINE)
        holder[0].stop()  # a callback that finishes the attempt from the watchdog thread
        stopped.set()

    def broken_check() -> bool:
        raise OSError("connection reset")

    holder.append(pool.watch(0.01, check=broken_check, on_lost=on_lost))
    registered.set()
    assert stopped.wait(DEADLINE)


def test_no_check_runs_after_stop() -> None:
    pool = WatchdogPool()
    checks: list[float] = []
    watch = pool.watch(
        0.005, check=lambda: checks.append(time.monotonic()) or True, on_lost=lambda: None
    )
    assert _wait_for(lambda: len(checks) >= 3)
    watch.stop()
    count = len(checks)
    _ticked_past(pool, 0.005)  # a check of the stopped watch would have been due by now
    assert len(checks) == count


def test_idle_threads_are_bounded() -> None:
    pool = WatchdogPool(max_idle=2)
    running, go = threading.Semaphore(0), threading.Event()

    def check() -> bool:
        running.release()
        go.wait(DEADLINE)  # each first check holds its thread: five watches need five threads
        return True

    watches = [pool.watch(0.01, check=check, on_lost=lambda: None) for _ in range(5)]
    for _ in range(5):
        assert running.acquire(timeout=DEADLINE)  # every watch came due and runs on a thread
    go.set()
    for watch in watches:
        watch.stop()
    assert _wait_for(lambda: pool.idle() == 2)
    assert pool.started == 5
    _ticked_past(pool, 0.01)  # one more watch: an idle thread takes it, none is started
    assert _wait_for(lambda: pool.idle() == 2)
    assert pool.started == 5


def test_a_readable_socket_runs_the_check_at_once_and_a_loss_is_confirmed_by_it() -> None:
    """An event on the lock's socket runs the real check (interval 60 s: no periodic check
    comes); a readable socket whose check says held (a NOTICE) is no loss."""
    import socket

    pool = WatchdogPool()
    ours, server = socket.socketpair()
    held, checked, lost = [True], threading.Semaphore(0), threading.Event()

    def check() -> bool:
        try:
            ours.recv(100, socket.MSG_DONTWAIT)  # the check reads what arrived, as a driver does
        except BlockingIOError:
            pass
        checked.release()
        return held[0]

    watch = pool.watch(60.0, check=check, on_lost=lost.set, fd=ours.fileno())
    server.send(b"N")  # a notice: readable, the check runs, the lock is still held
    assert checked.acquire(timeout=DEADLINE)
    assert not lost.is_set()
    held[0] = False
    server.close()  # the server ended the session
    assert lost.wait(DEADLINE)
    watch.stop()
    ours.close()
