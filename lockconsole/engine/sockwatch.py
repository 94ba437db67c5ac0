"""One thread that waits on every held lock's socket, so a lost session is noticed at once.

A PostgreSQL or MySQL session that the server ends (pg_terminate_backend, KILL, a restart)
sends its last message and closes the socket: the lock connection turns readable or hangs up.
While a lock is held its connection is otherwise silent (the only statements on it are the
watchdog's checks), so one epoll thread waiting on all of them notices the end within
milliseconds. Readable is not proof: a NOTICE, a parameter status or the answer to a check
that is running also make it readable. So an event only triggers the watch's real check
(Watch.poke): the lock is declared lost only when that check says so. The periodic checks of
the watchdog remain as the backstop (a silent network loss makes no event at all).

The check and, on a loss, the attempt's on_lost (which signals the job and returns) run on this
thread; a check on a session the server ended fails at once, so they do not hold it up.

Linux only (epoll); elsewhere `available` is False and the periodic checks do the work.
"""

from __future__ import annotations

import logging
import os
import select
import threading
from typing import Protocol

from lockconsole.backends.threads import start_quiet

log = logging.getLogger(__name__)
_EVENTS = (
    getattr(select, "EPOLLIN", 0)
    | getattr(select, "EPOLLRDHUP", 0)
    | getattr(select, "EPOLLHUP", 0)
    | getattr(select, "EPOLLERR", 0)
    | getattr(select, "EPOLLONESHOT", 0)
)
WAIT_SECONDS = 30.0  # the thread wakes this often with nothing to do, and ends when idle


class Poked(Protocol):
    """What is watched: poke() runs the real check, True to keep watching."""

    def poke(self) -> bool: ...


class SocketWatcher:
    """Maps each watched socket to its watch; one daemon thread waits on them all."""

    available = hasattr(select, "epoll")
    _mutex: threading.Lock
    _epoll: select.epoll | None
    _watches: dict[int, Poked]
    _thread: threading.Thread | None

    def __init__(self) -> None:
        self._forget()

    def add(self, fd: int, watch: Poked) -> bool:
        """Watch `fd` for `watch` (its poke() runs on an event); False if it cannot be watched."""
        if not self.available:
            return False
        with self._mutex:
            if self._epoll is None:
                self._epoll = select.epoll()
            try:
                self._epoll.register(fd, _EVENTS)
            except OSError as exc:  # a closed or duplicate descriptor: periodic checks only
                log.debug("cannot watch socket %s: %s", fd, exc)
                return False
            self._watches[fd] = watch
            if self._thread is None:
                thread = threading.Thread(
                    target=self._loop,
                    args=(self._epoll,),
                    name="lockconsole-sockets",
                    daemon=True,
                )
                self._thread = thread
                start_quiet(thread)
        return True

    def remove(self, fd: int, watch: Poked) -> None:
        """Stop watching `fd` (if it still belongs to `watch`)."""
        with self._mutex:
            if self._watches.get(fd) is not watch:
                return
            del self._watches[fd]
            try:
                assert self._epoll is not None
                self._epoll.unregister(fd)
            except OSError:
                pass  # already closed: the kernel dropped it

    def _rearm(self, fd: int, watch: Poked) -> None:
        with self._mutex:
            if self._watches.get(fd) is watch and self._epoll is not None:
                try:
                    self._epoll.modify(fd, _EVENTS)
                except OSError:
                    pass

    def _loop(self, epoll: select.epoll) -> None:
        while True:
            try:
                events = epoll.poll(WAIT_SECONDS)
            except OSError:  # the epoll was closed (after a fork)
                return
            for fd, _mask in events:
                with self._mutex:
                    watch = self._watches.get(fd)
                if watch is not None and watch.poke():
                    self._rearm(fd, watch)
            if not events:
                with self._mutex:
                    if not self._watches:
                        self._thread = None
                        return

    def _forget(self) -> None:
        """A fresh state (also in a forked child: the parent's thread and epoll are not ours)."""
        self._mutex = threading.Lock()
        self._epoll = None
        self._watches = {}
        self._thread = None


SOCKETS = SocketWatcher()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=SOCKETS._forget)
