"""Watchdog threads: a thread per watch that came due, reused between attempts; nothing wakes
for a watch stopped before its first check; stop() waits for a running check."""

from __future__ import annotations

import threading
import time

from lockconsole.engine.watchdog import WatchdogPool


def _wait_for(predicate, timeout: float = 5.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.005)
    return False


def test_a_false_check_calls_on_lost_once_and_the_thread_is_reused() -> None:
    pool = WatchdogPool()
    lost = threading.Event()
    calls: list[str] = []
    watch = pool.watch(0.01, check=lambda: calls.append("check") or False, on_lost=lost.set)
    assert lost.wait(5)
    assert calls == ["check"]
    assert _wait_for(lambda: pool.idle() == 1)
    threads = threading.active_count()
    watch.stop()
    checked = threading.Event()
    second = pool.watch(0.01, check=lambda: checked.set() or True, on_lost=lost.clear)
    assert checked.wait(5)
    assert pool.idle() == 0  # the idle thread took the new watch: no thread was started
    assert threading.active_count() == threads
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
    threads = threading.active_count()
    checks: list[int] = []
    for _ in range(200):
        pool.watch(0.05, check=lambda: checks.append(1) or True, on_lost=lambda: None).stop()
    time.sleep(0.2)
    assert checks == []
    assert pool.idle() == 0 and threading.active_count() == threads


def test_stop_waits_for_a_running_check() -> None:
    pool = WatchdogPool()
    inside, release, done = threading.Event(), threading.Event(), threading.Event()

    def slow_check() -> bool:
        inside.set()
        release.wait(5)
        done.set()
        return True

    watch = pool.watch(0.01, check=slow_check, on_lost=lambda: None)
    assert inside.wait(5)
    returned: list[bool] = []
    stopper = threading.Thread(target=lambda: returned.append(watch.stop() is None))
    stopper.start()
    stopper.join(0.1)
    assert not returned  # stop() waits while the check runs
    release.set()
    stopper.join(5)
    assert returned and done.is_set()  # stop() returned only after the check finished


def test_stop_from_on_lost_does_not_deadlock_and_errors_count_as_lost() -> None:
    pool = WatchdogPool()
    stopped = threading.Event()
    holder: list = []

    def on_lost() -> None:
        holder[0].stop()  # a callback that finishes the attempt from the watchdog thread
        stopped.set()

    def broken_check() -> bool:
        raise OSError("connection reset")

    holder.append(pool.watch(0.01, check=broken_check, on_lost=on_lost))
    assert stopped.wait(5)


def test_no_check_runs_after_stop() -> None:
    pool = WatchdogPool()
    checks: list[float] = []
    watch = pool.watch(
        0.005, check=lambda: checks.append(time.monotonic()) or True, on_lost=lambda: None
    )
    assert _wait_for(lambda: len(checks) >= 3)
    watch.stop()
    count = len(checks)
    time.sleep(0.05)
    assert len(checks) == count


def test_idle_threads_are_bounded() -> None:
    pool = WatchdogPool(max_idle=2)
    running = threading.Semaphore(0)

    def check() -> bool:
        running.release()
        return True

    watches = [pool.watch(0.01, check=check, on_lost=lambda: None) for _ in range(5)]
    for _ in range(5):
        assert running.acquire(timeout=5)  # every watch came due and runs on a thread
    for watch in watches:
        watch.stop()
    assert _wait_for(lambda: pool.idle() == 2)
    time.sleep(0.05)
    assert pool.idle() == 2


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
    assert checked.acquire(timeout=30)
    assert not lost.is_set()
    held[0] = False
    server.close()  # the server ended the session
    assert lost.wait(30)
    watch.stop()
    ours.close()
