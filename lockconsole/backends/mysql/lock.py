"""MySQL/MariaDB user-level locks: GET_LOCK(name, 0) held by one dedicated connection."""

from __future__ import annotations

from typing import Any

from lockconsole.backends import LockBase, sqlfiles
from lockconsole.backends.connect import connect_mysql, first_line, socket_fd_of
from lockconsole.backends.mysql import answers
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job

READ_TIMEOUT = 10  # seconds: a statement on the lock connection that gets no answer fails


class MysqlLock(LockBase):
    """GET_LOCK(name, 0) on a connection of its own; RELEASE_LOCK or disconnect frees it."""

    strategy = "mysql"
    fencing_token: int | None = None

    def __init__(self, job: Job, database: Database) -> None:
        if job.key.kind != "name":
            raise ValueError(f"job {job.name!r}: a {job.key.kind} key cannot be a GET_LOCK name")
        self.job = job
        self.database = database
        self.name = str(job.key.value)
        self.session_id: int | None = None  # CONNECTION_ID() of the lock connection
        self.held = False
        self.lost_on_release = False  # release found the lock (or its session) already gone
        self._closed = False
        # several statements per call: the merged decide and finish (backends/mysql/merged.py)
        self.multi_statements = True
        self.conn = connect_mysql(database.url, read_timeout=READ_TIMEOUT, multi_statements=True)
        self._merged: dict[str, str] = {}  # query name -> its text with the name escaped in
        # parameter name -> (its last value, the escaping mode, that value escaped): the merged
        # statements escape a value again only when it changed since the last attempt (merged.py)
        self.literals: dict[str, tuple[Any, int, str]] = {}
        # the merged queries prepared on this connection (MariaDB); `preparing` turns False
        # when the server refuses a PREPARE here, and the merged queries go as text from then on
        self.prepared: set[str] = set()
        self.preparing = True
        self.probed = False  # decide_run's probe of the UPDATE privilege passed here once

    def _fetch(self, query: str) -> tuple[int | None, ...] | None:
        """One row of a query file (numbers or NULL), read by answers.call; the name is escaped
        in once per lock, not per call."""
        sql = self._merged.get(query)
        if sql is None:
            with self.conn.cursor() as cur:
                sql = cur.mogrify(sqlfiles.load(query, "mysql"), {"name": self.name})
            self._merged[query] = sql
        try:
            row = answers.call(self.conn, sql)
        except answers.CallFailed as failed:
            raise failed.error from None
        return None if row is None else tuple(None if v is None else int(v) for v in row)

    def server_time(self) -> Any:
        """The server's clock now (naive UTC), on the lock's own connection: the ledger's clock
        when the ledger shares this database, read without opening a connection for it."""
        import pymysql

        try:
            with self.conn.cursor() as cur:
                cur.execute(sqlfiles.load("select_server_time", "mysql"))
                row = cur.fetchone()
        except (pymysql.MySQLError, OSError) as exc:
            raise self.failure("reading the server's clock", exc) from None
        if row is None:
            raise DatabaseError(f"{self.database.url.masked}: the server's clock answered no row")
        return row[0]

    def failure(self, what: str, exc: BaseException) -> DatabaseError:
        url = self.database.url
        return DatabaseError(f"{url.masked}: {what} failed: {scrub(first_line(exc), url)}")

    def gone(self) -> bool:
        return self._closed or not self.conn.open

    def socket_fd(self) -> int | None:
        """The lock connection's socket: it turns readable when the server ends the session."""
        return None if self.gone() else socket_fd_of(self.conn)

    def end_stuck_session(self, seconds: float) -> bool:
        """From a fresh connection, end this lock's own session if it still holds the name."""
        import pymysql

        if self.session_id is None:
            return False
        conn = connect_mysql(self.database.url, connect_timeout=seconds, read_timeout=seconds)
        try:
            with conn.cursor() as cur:
                sql = sqlfiles.load("kill_connection_if_holder", "mysql")
                cur.execute(sql, {"name": self.name, "id": self.session_id})
            return True
        except pymysql.MySQLError:  # 1094: not the holder any more, nothing was killed
            return False
        finally:
            conn.close()

    def acquire(self) -> bool:
        """Try once without waiting; True when this connection now holds the name."""
        import pymysql

        if self.held:
            return True
        try:
            row = self._fetch("get_lock")
        except (pymysql.MySQLError, OSError) as exc:
            raise self.failure(f"GET_LOCK({self.name!r}, 0)", exc) from None
        if row is None:  # GET_LOCK always answers one row: a broken session
            raise DatabaseError(f"{self.database.url.masked}: GET_LOCK({self.name!r}, 0): no row")
        got, self.session_id = row[0], row[1]
        if got is None:
            raise DatabaseError(
                f"{self.database.url.masked}: GET_LOCK({self.name!r}, 0) returned NULL "
                "(the server refused the lock name, or this session was killed)"
            )
        self.held = got == 1
        return self.held

    def still_held(self) -> bool:
        """IS_USED_LOCK(name) = CONNECTION_ID(); False on any connection error."""
        import pymysql

        if not self.held or self.gone():
            return False
        try:
            row = self._fetch("check_lock")
        except (pymysql.MySQLError, OSError):
            return False
        return bool(row and row[0])

    def release(self) -> bool | None:
        """RELEASE_LOCK: True if it was ours; 0/NULL or a dead connection: lost_on_release."""
        import pymysql

        return self._unlock(
            lambda: self._fetch("release_lock"),
            (pymysql.MySQLError, OSError),
            f"RELEASE_LOCK({self.name!r})",
        )

    def reusable(self) -> bool:
        """Released cleanly and still connected: fit for another attempt."""
        return not (self.held or self.lost_on_release or self.gone())

    def close(self) -> None:
        """Close the connection (idempotent); the server frees its locks."""
        import pymysql

        self.held = False
        if self._closed:
            return
        self._closed = True
        try:
            self.conn.close()
        except (pymysql.MySQLError, OSError):
            pass
