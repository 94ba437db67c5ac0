"""PostgreSQL advisory locks: session-level (pg-session) and transaction-level (pg-xact).

Each lock object owns one dedicated autocommit psycopg connection, opened in the
constructor and never pooled. The watchdog's check looks the lock up in pg_locks on that
same connection, so it also notices a terminated backend or a dead socket: a granted
advisory row for pg_backend_pid(), in current_database(), with the key's classid/objid/objsubid
(keys.pg_locks_identity; classid and objid are oid, so the query compares them as bigint).

The query files carry no comments on purpose: the text is sent on every call and is what
pg_stat_activity.query shows for the holder.
"""

from __future__ import annotations

import logging
import socket
from typing import TYPE_CHECKING, Any

from lockconsole.backends import LockBase, sqlfiles
from lockconsole.backends.connect import connect_pg, first_line, prepare_if_direct, socket_fd_of
from lockconsole.config.urls import scrub
from lockconsole.model.errors import ConfigError, DatabaseError
from lockconsole.model.jobs import Database, Job
from lockconsole.model.keys import pg_locks_identity

if TYPE_CHECKING:
    from psycopg import Cursor
    from psycopg.rows import TupleRow

log = logging.getLogger(__name__)

CHECK_TIMEOUT = 10  # seconds: statement_timeout of the lock session
TCP_GIVE_UP = 15  # seconds without an answer from the server before the socket fails
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (libpq's PQTRANS_IDLE), without importing it
_PIPELINE: list[bool | None] = [None]  # libpq supports pipeline mode (asked once)


class PoolerRefused(ConfigError):
    """pg-session behind a transaction-mode pooler, and the job did not set allow_pooler."""


class _PgLock(LockBase):
    """What both PostgreSQL strategies share: the connection, the key, the pg_locks check."""

    strategy = ""
    fencing_token: int | None = None

    def __init__(
        self, job: Job, database: Database, *, application_name: str = "lockconsole"
    ) -> None:
        self.job = job
        self.database = database
        self.session_id: int | None = None  # pg_backend_pid() of the lock connection
        self.held = False
        self.lost_on_release = False  # release found the lock (or its session) already gone
        # the key as the lock functions take it: `key`, or `key1` and `key2`
        self.key_params, self._suffix = _key_params(job)
        # the key as pg_locks shows it: classid, objid, objsubid
        self.identity = dict(
            zip(("classid", "objid", "objsubid"), pg_locks_identity(job.key), strict=True)
        )
        self._timeout_set = False
        self._ports_seen = False  # prepare_if_direct has looked at this connection's ports
        self.conn = connect_pg(database.url, application_name=application_name)
        _fail_fast(self.conn)

    def _sql(self, verb: str) -> str:
        return sqlfiles.load(verb + self._suffix)

    def failure(self, what: str, exc: BaseException) -> DatabaseError:
        """`what` failed on this lock's database, said in one line without a password."""
        url = self.database.url
        return DatabaseError(f"{url.masked}: {what} failed: {scrub(first_line(exc), url)}")

    def answer(self, sql: str, params: dict[str, Any], what: str) -> tuple[Any, ...]:
        """The one row `sql` answers, sent through the connection's Wire (prepared once on a
        direct connection); a psycopg.Error as a cursor would raise it."""
        from lockconsole.backends.postgres.wire import wire_for

        return (
            wire_for(self.conn).exchange([(sql, params)]).first(0, self.database.url.masked, what)
        )

    def one_row(self, cursor: Cursor[TupleRow], what: str) -> TupleRow:
        """The one row a lock function's SELECT answers."""
        row = cursor.fetchone()
        if row is None:
            raise DatabaseError(f"{self.database.url.masked}: {what} answered no row")
        return row

    def _note_ports(self, server_port: int | None, client_port: int | None) -> None:
        """Once per connection: prepare repeated statements if it is direct (no pooler)."""
        if not self._ports_seen:
            self._ports_seen = True
            prepare_if_direct(self.conn, server_port, client_port)

    def gone(self) -> bool:
        return bool(self.conn.closed or self.conn.broken)

    def server_time(self) -> Any:
        """The server's clock now, on the lock's own connection: the ledger's clock when the
        ledger shares this database, read without opening a connection for it."""
        import psycopg

        try:
            row = self.conn.execute(sqlfiles.load("select_server_time", "postgresql")).fetchone()
        except psycopg.Error as exc:
            raise self.failure("reading the server's clock", exc) from None
        if row is None:
            raise DatabaseError(f"{self.database.url.masked}: the server's clock answered no row")
        return row[0]

    def socket_fd(self) -> int | None:
        """The lock connection's socket: it turns readable when the server ends the session."""
        return None if self.gone() else socket_fd_of(self.conn)

    def end_stuck_session(self, seconds: float) -> bool:
        """From a fresh connection, end this lock's own server session if it still holds the
        key (the guard also protects a reused pid); True when it was ended."""
        if self.session_id is None:
            return False
        params = {"pid": self.session_id, "backend_start": None, "timeout_ms": int(seconds * 1000)}
        conn = connect_pg(
            self.database.url,
            application_name="lockconsole:cleanup",
            connect_timeout=max(1, int(seconds)),
        )
        try:
            row = conn.execute(sqlfiles.load("terminate_pg_holder"), params | self.identity)
            found = row.fetchone()
        finally:
            conn.close()
        return bool(found and found[1])

    def still_held(self) -> bool:
        """True while pg_locks shows this backend holding the key; False on any connection error."""
        import psycopg

        if not self.held or self.gone():
            return False
        try:
            if not self._timeout_set:
                # not in a pipeline: a pipeline on a terminated session logs "error ignored
                # terminating" on its way out, noise for a loss that is already handled
                timeout = {"timeout": f"{CHECK_TIMEOUT}s"}
                self.conn.execute(sqlfiles.load("set_statement_timeout"), timeout)
                self._timeout_set = True
            row = self.answer(sqlfiles.load("check_advisory_lock"), self.identity, "the check")
        except (psycopg.Error, DatabaseError):
            return False
        return bool(row and row[0])

    def reusable(self) -> bool:
        """Released cleanly, connected and idle (no open transaction): fit for another attempt."""
        if self.held or self.lost_on_release or self.gone():
            return False
        return bool(self.conn.pgconn.transaction_status == _IDLE)

    def close(self) -> None:
        """Close the connection (idempotent); any lock of the session dies with it."""
        import psycopg

        self.held = False
        try:
            self.conn.close()
        except psycopg.Error:
            pass


class PgSessionLock(_PgLock):
    """pg_try_advisory_lock held by the session for the whole job; released by unlock or close.

    Pooler guard (a transaction pooler hands a session lock to the next client), in the same round
    trip as the try-lock: the statement takes the lock only if inet_server_port() equals the port we
    dialled (or is NULL: a Unix socket). A mismatch means a pooler or TCP proxy sits in front; then,
    and only then, the PgBouncer admin console is asked for the pool mode: session pooling is safe
    and the lock is tried again; anything else raises PoolerRefused (exit 2) unless the job sets
    allow_pooler = true, which runs with a warning in the log.
    """

    strategy = "pg-session"
    _guard_passed = False  # a try on this connection got past the pooler guard

    def acquire(self) -> bool:
        """Try once without waiting; True when this session now holds the key."""
        if self.held:
            return True
        allow = self.job.allow_pooler
        got, server_port = self._try(any_port=allow)
        if got is None:  # the guard found a proxy and did not lock
            mode, evidence = self._pool_mode(server_port)
            if mode != "session":
                raise PoolerRefused(self._refusal(mode, evidence))
            got, _ = self._try(any_port=True)
        self.held = bool(got)
        return self.held

    def _warn_if_proxied(self, server_port: int | None) -> None:
        """allow_pooler let a try through a proxy: say so in the log."""
        if self.job.allow_pooler and server_port is not None and server_port != self._dsn_port():
            log.warning("%s", self._refusal(None, self._mismatch(server_port), allowed=True))

    def try_statement(self, *, any_port: bool) -> tuple[str, dict[str, Any], bool]:
        """The try-lock's text, its parameters, and whether the pooler guard is in it.

        The guard is a property of the connection, so once it has let a try through on this
        connection the later tries use the plain statement (no server port: nothing to warn).
        The guarded statement answers (got, pid, server port, client port), the plain one
        (got, pid).
        """
        if self._guard_passed:
            return self._sql("try_advisory_lock_plain"), self.key_params, False
        params = {**self.key_params, "any_port": any_port, "port": self._dsn_port()}
        return self._sql("try_advisory_lock"), params, True

    def answered(
        self,
        got: bool | None,
        pid: int,
        server_port: int | None,
        client_port: int | None,
        *,
        guarded: bool,
    ) -> None:
        """Take in the try-lock's answer: the session's pid; after a guarded try, whether the
        guard let it through, the connection's ports (a direct one prepares its repeated
        statements) and, when allow_pooler let it through a proxy, a warning in the log."""
        self.session_id = int(pid)
        if guarded:
            self._note_ports(server_port, client_port)
            self._guard_passed = got is not None
            if got is not None:
                self._warn_if_proxied(server_port)

    def _try(self, *, any_port: bool) -> tuple[bool | None, int | None]:
        """(got, server port); got is None when the pooler guard stopped the statement."""
        import psycopg

        sql, params, guarded = self.try_statement(any_port=any_port)
        try:
            row = self.answer(sql, params, "pg_try_advisory_lock")
        except psycopg.Error as exc:
            raise self.failure("pg_try_advisory_lock", exc) from None
        got, pid = row[0], row[1]
        server_port, client_port = (row[2], row[3]) if guarded else (None, None)
        self.answered(got, pid, server_port, client_port, guarded=guarded)
        return got, server_port

    def _dsn_port(self) -> int:
        try:
            return int(self.conn.info.port)
        except (TypeError, ValueError):
            return 5432

    def _mismatch(self, server_port: int | None) -> str:
        return f"inet_server_port() {server_port} != DSN port {self._dsn_port()}"

    def _pool_mode(self, server_port: int | None) -> tuple[str | None, str]:
        """The pool mode behind a port mismatch, from PgBouncer's admin console if it answers."""
        from lockconsole.backends.postgres.pooler import _probe_admin

        evidence = self._mismatch(server_port)
        try:
            kind, mode, admin = _probe_admin(self.database.url)
        except Exception as exc:  # no admin console: an unknown proxy
            return None, f"{evidence}; {scrub(first_line(exc), self.database.url)}"
        what = "PgBouncer" if kind == "pgbouncer" else "a pooler or proxy"
        return mode, f"{what}: {evidence}; {scrub(admin, self.database.url)}"

    def _refusal(self, mode: str | None, evidence: str, *, allowed: bool = False) -> str:
        where = f"{mode} pooling" if mode else "a pooler or proxy of unknown pool mode"
        head = (
            f"job {self.job.name!r}: pg-session behind {where} at {self.database.url.masked} "
            f"({evidence}): a session lock can outlive its client, pass to the next client "
            "and be unlocked on another server connection"
        )
        if allowed:
            return head + "; running anyway because allow_pooler = true"
        return head + '; use strategy = "pg-xact", or set allow_pooler = true to run anyway'

    def release(self) -> bool | None:
        """pg_advisory_unlock: True if it was ours; False (lost_on_release) if it was gone."""
        import psycopg

        return self._unlock(
            lambda: self.answer(self._sql("advisory_unlock"), self.key_params, "the unlock"),
            (psycopg.Error,),
            "pg_advisory_unlock",
        )


class PgXactLock(_PgLock):
    """pg_try_advisory_xact_lock inside a transaction kept open for the job; COMMIT releases it."""

    strategy = "pg-xact"

    def acquire(self) -> bool:
        """BEGIN and the try-lock in one round trip; on False the transaction ends at once."""
        if self.held:
            return True
        if not self.try_open():
            self._end(commit=False)
            return False
        self.held = True
        return True

    def try_open(self) -> bool:
        """BEGIN and the try-lock in one round trip, leaving the transaction open either way."""
        import psycopg

        try:
            if _PIPELINE[0] is None:
                _PIPELINE[0] = psycopg.Pipeline.is_supported()
            if _PIPELINE[0]:
                from lockconsole.backends.postgres.wire import wire_for

                begin_and_try = [
                    (sqlfiles.load("begin_transaction"), {}),
                    (self._sql("try_advisory_xact_lock"), self.key_params),
                ]
                answer = wire_for(self.conn).exchange(begin_and_try)
                row = answer.first(1, self.database.url.masked, "pg_try_advisory_xact_lock")
            else:  # libpq < 14: two round trips
                self.conn.execute(sqlfiles.load("begin_transaction"))
                cur = self.conn.execute(self._sql("try_advisory_xact_lock"), self.key_params)
                row = self.one_row(cur, "pg_try_advisory_xact_lock")
        except psycopg.Error as exc:
            try:
                self.conn.rollback()
            except psycopg.Error:
                pass
            raise self.failure("pg_try_advisory_xact_lock", exc) from None
        self.session_id = int(row[1])
        self._note_ports(row[2], row[3])
        return bool(row[0])

    def release(self, *, commit: bool = True) -> bool | None:
        """End the job's transaction (COMMIT, or ROLLBACK), which frees the lock: True if the
        session still had it, False (lost_on_release) if the session had died."""
        if not self.held:
            return None
        self.held = False
        if self.gone():
            self.lost_on_release = True
            return False
        self._end(commit=commit)
        return not self.lost_on_release

    def _end(self, *, commit: bool) -> None:
        import psycopg

        try:
            if commit:
                self.conn.commit()
            else:
                self.conn.rollback()
        except psycopg.Error as exc:
            if self.gone():  # the session died, and the transaction's lock with it
                self.lost_on_release = True
                return
            raise self.failure("COMMIT" if commit else "ROLLBACK", exc) from None


def _key_params(job: Job) -> tuple[dict[str, int], str]:
    """Query parameters and query-name suffix for the job's key."""
    key = job.key
    if key.kind == "int64":
        return {"key": key.int64()}, ""
    if key.kind == "int4pair":
        a, b = key.int4pair()
        return {"key1": a, "key2": b}, "_pair"
    raise ValueError(f"job {job.name!r}: a {key.kind} key cannot be a PostgreSQL advisory lock")


def _fail_fast(conn: Any) -> None:
    """Keepalives and TCP_USER_TIMEOUT on a TCP connection: a lost peer errors, never hangs."""
    if not hasattr(socket, "TCP_USER_TIMEOUT"):
        return
    try:
        with socket.fromfd(conn.fileno(), socket.AF_INET, socket.SOCK_STREAM) as sock:
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_TYPE) != socket.SOCK_STREAM:
                return
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 2)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 3)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, TCP_GIVE_UP * 1000)
    except OSError:
        pass  # a Unix socket: no TCP options, and no silent network loss either
