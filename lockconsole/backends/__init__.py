"""Lock backends: one module per lock kind, each holding one job's lock on its own connection.

The runner drives every backend the same way:
  acquire() once (never waits) -> still_held() from the watchdog thread while the job runs
  -> release() after the watchdog stopped -> close().
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any, Protocol, Self

from lockconsole.model.jobs import Database, Job


class Lock(Protocol):
    """One job's lock on a dedicated connection that never goes back to a pool while held."""

    strategy: str
    job: Job  # replaced when a kept session runs the job again (its limits may differ)
    database: Database
    session_id: int | None  # PostgreSQL backend pid / MySQL connection id; None for leases
    fencing_token: int | None  # leases: from the row; redis: issued by the ledger (fence)
    held: bool  # this object holds the lock now, as far as it knows (still_held() asks)

    def acquire(self) -> bool:
        """Try once, without waiting: True when this session now holds the lock."""

    def still_held(self) -> bool:
        """False when the lock or its connection is gone (may raise DatabaseError)."""

    def gone(self) -> bool:
        """True when the lock's own connection is closed or broken, without asking the
        server; always False for the kinds that open a new connection when one breaks."""

    def release(self) -> bool | None:
        """Give the lock back (a lease honours min_hold); harmless after a loss.

        True when the lock (or the lease row with our token) was still ours, False when it
        was already gone, None when nothing was held.
        """

    def close(self) -> None:
        """Close the connection; session locks die with it."""

    def reusable(self) -> bool:
        """Released cleanly, nothing lost, connection idle: fit for another attempt."""


class LockBase:
    """`with lock:` releases a held lock on the way out, then closes the connection."""

    held: bool
    lost_on_release: bool

    def release(self) -> bool | None:
        raise NotImplementedError

    def gone(self) -> bool:
        """Leases and Redis open a new connection when one breaks: nothing dies with it."""
        return False

    def abandon(self) -> None:
        """Cut our end of the lock's connection now, without a word to the server: a call
        blocked on it returns with an error. The server's session may outlive it (a peer on
        the way can keep it open): end_stuck_session() ends that one."""
        from lockconsole.backends.connect import shut_socket

        socket_fd = getattr(self, "socket_fd", None)  # the kinds with a socket of their own
        shut_socket(socket_fd() if socket_fd is not None else None)

    def failure(self, what: str, exc: BaseException) -> Exception:
        raise NotImplementedError

    def _unlock(
        self, run: Callable[[], Any], errors: tuple[type[BaseException], ...], what: str
    ) -> bool | None:
        """Run the unlock statement: True if the lock was ours; a false result or a dead
        connection (the session's locks died with it) sets lost_on_release and returns False."""
        if not self.held:
            return None
        self.held = False
        if self.gone():
            self.lost_on_release = True
            return False
        try:
            row = run()
        except errors as exc:
            if self.gone():
                self.lost_on_release = True
                return False
            raise self.failure(what, exc) from None
        if not (row and row[0]):
            self.lost_on_release = True
        return not self.lost_on_release

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if self.held:
                self.release()
        finally:
            self.close()
