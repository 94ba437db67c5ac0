"""ShedLock-compatible leases: a row per name in a lease table, held until `lock_until`.

Acquire, check and release follow ShedLock's `usingDbTime()` statements (insert, else update
where `lock_until <= now`; unlock sets `lock_until` to now or the lock's minimum) on a
dedicated connection, so lockconsole and ShedLock apps exclude each other on the same table.
Our extra nullable `fencing_token` column grows with every acquisition of a name; on a table
without it (created by ShedLock) the token is None. SQLite has no server clock, so there the
Python UTC clock stands in for the database's.

The statements are built with SQLAlchemy Core once per LeaseLock (after the table's columns are
known), compiled for the connection's dialect, and then run on the raw DB-API connection in
autocommit: a statement that is atomic alone (PostgreSQL's INSERT … ON CONFLICT … DO UPDATE …
WHERE … RETURNING, MySQL's INSERT IGNORE, every check and release) is one round trip; only the
UPDATE + SELECT of the token on MySQL/SQLite share a transaction. Everything that varies per
call is a bound parameter (the token; on SQLite the Python clock).
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, String, Table, bindparam, case, func, insert, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import SQLAlchemyError

from lockconsole.backends import LockBase, sqlfiles
from lockconsole.backends.connect import close_quietly, first_line, prepare_if_direct
from lockconsole.backends.lease.table import FENCING, db_now, ensure_lease_table, lease_table, plus
from lockconsole.backends.sa import engine_for
from lockconsole.config.urls import scrub
from lockconsole.model.errors import ConfigError, DatabaseError
from lockconsole.model.jobs import Database, Job

DEFAULT_MAX_DURATION = timedelta(hours=1)  # models/config always set it for leases
READ_TIMEOUT = 30  # seconds: a MySQL statement that long means the connection is gone
SQLITE_STAMP = "%Y-%m-%d %H:%M:%S.%f"  # how SQLAlchemy (and so the lease table) stores times


class _Compiled:
    """One statement compiled once: its SQL text and how to order its parameters."""

    def __init__(self, stmt: Any, dialect: Any) -> None:
        compiled = stmt.compile(dialect=dialect)
        self.sql = str(compiled)
        self.defaults = compiled.construct_params()
        self.order = tuple(compiled.positiontup) if compiled.positional else None

    def params(self, given: dict[str, Any]) -> Any:
        values = {**self.defaults, **given} if given else self.defaults
        if self.order is None:
            return values
        return [values[name] for name in self.order]


class LeaseLock(LockBase):
    """One job's lease row (ShedLock's table), held by `owner` until `lock_until`."""

    strategy = "lease"

    def __init__(self, job: Job, database: Database, *, owner: str) -> None:
        self.job, self.database, self.owner = job, database, owner
        self.name = str(job.key.value)
        if len(self.name) > 64 or len(owner) > 255:  # INSERT IGNORE would truncate silently
            raise ConfigError(f"lease {self.name[:64]!r}: name > 64 or owner > 255 characters")
        self.dialect = database.url.dialect
        self.session_id: int | None = None
        self.fencing_token: int | None = None
        self.held = False
        self.lost_before_release = False  # release() found the lease already expired/taken
        self.has_fencing: bool | None = None  # the table has fencing_token (None: unchecked)
        self._table: Table | None = None
        self._engine: Any = None
        self._conn: Any = None
        self._stmts: dict[str, _Compiled] = {}
        self._built_for: tuple[Any, ...] = ()
        self._errors: tuple[type[BaseException], ...] = (SQLAlchemyError,)

    # -- connection -------------------------------------------------------------------------

    def failed(self, exc: BaseException) -> DatabaseError:
        """A one-line DatabaseError naming the masked URL, never a password."""
        orig = getattr(exc, "orig", None) or exc
        url = self.database.url
        return DatabaseError(f"{url.masked}: lease {self.name}: {scrub(first_line(orig), url)}")

    def _connection(self) -> Any:
        """The dedicated autocommit connection, opened (and the table checked) on first use."""
        if self._engine is None:
            self._engine = engine_for(self.database.url, dedicated=True)
            _add_timeouts(self._engine, self.dialect)
            self._errors = (SQLAlchemyError, *_driver_errors(self.dialect))
        if self._conn is None:
            self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            if self.dialect == "postgresql":
                _prepare_if_direct(self._conn.connection.dbapi_connection)
        if self._table is None:
            table_name = self.job.lease_table
            try:
                self.has_fencing = ensure_lease_table(self._conn, table_name, self.dialect)
            except ValueError as exc:
                raise DatabaseError(f"{self.database.url.masked}: {exc}") from None
            self._table = lease_table(table_name, self.dialect, fencing=self.has_fencing)
        return self._conn

    def drop_connection(self) -> None:
        """Forget a broken connection (the next call opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                pass

    def merged_statement(self, name: str, *, drop: bool = True) -> tuple[Any, _Compiled]:
        """The raw connection and the compiled statement `name`, for a statement merged with
        the ledger's (merged.py); a DatabaseError when they cannot be had (the connection is
        then forgotten, when `drop`)."""
        try:
            return self._connection().connection.dbapi_connection, self._statements()[name]
        except self._errors as exc:
            if drop:
                self.drop_connection()
            raise self.failed(exc) from None

    def _run(self, name: str, given: dict[str, Any], fetch: str | None = None) -> Any:
        """Run one compiled statement on the raw connection: a row, a scalar or the row count."""
        dbapi = self._connection().connection.dbapi_connection
        stmt = self._statements()[name]
        if self.dialect == "postgresql":  # prepared once (wire.py), as the merged statements are
            from lockconsole.backends.postgres.wire import wire_for

            answer = wire_for(dbapi).exchange([(stmt.sql, stmt.params(given))]).checked()
            return answer.row(0) if fetch == "row" else answer.count(0)
        cur = dbapi.cursor()
        try:
            cur.execute(stmt.sql, stmt.params(given))
            if fetch == "row":
                return cur.fetchone()
            return cur.rowcount
        finally:
            cur.close()

    def _in_transaction(self, work: Any) -> Any:
        """`work()` between BEGIN and COMMIT on the raw connection (ROLLBACK on an error)."""
        dbapi = self._connection().connection.dbapi_connection
        cur = dbapi.cursor()
        try:
            cur.execute("BEGIN")
            try:
                result = work()
            except BaseException:
                try:
                    cur.execute("ROLLBACK")
                except Exception:
                    pass
                raise
            cur.execute("COMMIT")
            return result
        finally:
            cur.close()

    # -- the statements, built and compiled once ----------------------------------------------

    def _statements(self) -> dict[str, _Compiled]:
        key = (self._table, self.has_fencing, self.job.max_duration, self.job.min_hold)
        if self._built_for != key:
            self._stmts = self._build()
            self._built_for = key
        return self._stmts

    def _build(self) -> dict[str, _Compiled]:
        t, dialect, fencing = self._table, self.dialect, self.has_fencing
        assert t is not None
        max_duration = self.job.max_duration or DEFAULT_MAX_DURATION
        if dialect == "sqlite":  # the Python clock, bound per call as SQLAlchemy stores it
            now: Any = bindparam("now", "", type_=String())
            until: Any = bindparam("until", "", type_=String())
        else:
            now = db_now(dialect)
            until = plus(now, max_duration, dialect)
        taken: dict[str, Any] = {"lock_until": until, "locked_at": now, "locked_by": self.owner}
        row = dict(taken, name=self.name)
        token: BindParameter[int | None] = bindparam("token", None)
        mine = [t.c.name == self.name, t.c.locked_by == self.owner]
        if fencing:
            row[FENCING] = 1
            taken[FENCING] = func.coalesce(t.c[FENCING], 0) + 1
            mine.append(t.c[FENCING] == token)
        back = t.c[FENCING] if fencing else t.c.name
        stmts: dict[str, Any] = {}
        if dialect == "postgresql":
            stmt = postgresql.insert(t).values(row)
            stmts["acquire"] = stmt.on_conflict_do_update(
                index_elements=[t.c.name], set_=taken, where=t.c.lock_until <= now
            ).returning(back)
        else:
            ignore = "IGNORE" if dialect == "mysql" else "OR IGNORE"
            stmts["insert"] = insert(t).prefix_with(ignore).values(row)
            stmts["take"] = (
                update(t).where(t.c.name == self.name, t.c.lock_until <= now).values(taken)
            )
            stmts["token"] = select(back).where(t.c.name == self.name)
        stmts["check"] = select(t.c.name).where(*mine, t.c.lock_until > now)
        if dialect == "sqlite":  # no date arithmetic: release computes lock_until in Python
            stmts["locked_at"] = select(t.c.locked_at).where(t.c.name == self.name)
            stmts["release"] = update(t).where(*mine).values(lock_until=until)
        else:
            hold_until = plus(t.c.locked_at, self.job.min_hold, dialect)
            given_back = case((hold_until > now, hold_until), else_=now)
            stmts["release"] = update(t).where(*mine).values(lock_until=given_back)
            # the merged finish (merged.py): released only while still ours and unexpired
            stmts["release_held"] = (
                update(t).where(*mine, t.c.lock_until > now).values(lock_until=given_back)
            ).returning(t.c.name)
        sa_dialect = self._engine.dialect
        return {name: _Compiled(stmt, sa_dialect) for name, stmt in stmts.items()}

    def _clock(self, **extra: timedelta) -> dict[str, Any]:
        """SQLite only: `now` (and now + each of `extra`) as the lease table stores them."""
        if self.dialect != "sqlite":
            return {}
        now = datetime.now(UTC).replace(tzinfo=None)
        values = {"now": now.strftime(SQLITE_STAMP)}
        values.update({k: (now + d).strftime(SQLITE_STAMP) for k, d in extra.items()})
        return values

    def server_time(self) -> Any:
        """The server's clock now, on the lease's own connection (the ledger's clock when the
        ledger shares this database: no connection is opened for it)."""
        from lockconsole.backends import sqlfiles

        if self.dialect == "sqlite":
            return datetime.now(UTC)
        return (
            self._connection()
            .exec_driver_sql(sqlfiles.load("select_server_time", self.dialect))
            .scalar()
        )

    # -- the Lock protocol ------------------------------------------------------------------

    def acquire(self) -> bool:
        """ShedLock's acquire: insert the row if absent, else take it when lock_until <= now."""
        try:
            got, token = self._acquire()
        except self._errors as exc:
            self.drop_connection()
            raise self.failed(exc) from None
        if got:  # a refusal leaves an earlier hold of this object as it was
            self.held, self.fencing_token, self.lost_before_release = True, token, False
        return got

    def _acquire(self) -> tuple[bool, int | None]:
        """(won, fencing token): one statement on PostgreSQL; INSERT, then UPDATE + SELECT."""
        self._connection()
        fencing = self.has_fencing
        until = {"until": self.job.max_duration or DEFAULT_MAX_DURATION}
        if self.dialect == "postgresql":
            found = self._run("acquire", {}, "row")
            return found is not None, (found[0] if found and fencing else None)
        if self._run("insert", self._clock(**until)) == 1:
            return True, (1 if fencing else None)
        clock = self._clock(**until)  # SQLite: a fresh Python clock reading

        def take() -> tuple[bool, int | None]:
            if self._run("take", clock) != 1:
                return False, None
            if not fencing:
                return True, None
            return True, self._run("token", {}, "row")[0]

        if not fencing:  # one statement: atomic alone
            return take()
        return self._in_transaction(take)

    def still_held(self) -> bool:
        """True while our row has our owner (and token) and lock_until > now; never raises."""
        if not self.held:
            return False
        errors: tuple[type[BaseException], ...] = (*self._errors, DatabaseError)
        for attempt in (1, 2):
            try:
                found = self._run("check", {"token": self.fencing_token, **self._clock()}, "row")
                return found is not None
            except errors:
                self.drop_connection()
                if attempt == 2:
                    return False
        return False

    def release(self) -> bool | None:
        """ShedLock's unlock: lock_until = max(now, locked_at + min_hold); never DELETE.

        True when the row still carried our owner and token, False when it had been taken.
        """
        if not self.held:
            return None
        self.held = False
        for attempt in (1, 2):  # a dropped connection is reopened once; the UPDATE is idempotent
            try:
                changed = self._release()
            except self._errors as exc:
                self.drop_connection()
                if attempt == 2:
                    raise self.failed(exc) from None
            else:
                self.lost_before_release = changed != 1
                return not self.lost_before_release
        return None

    def _release(self) -> int:
        """The unlock UPDATE guarded by owner (and fencing token); the affected row count."""
        given: dict[str, Any] = {"token": self.fencing_token}
        if self.dialect == "sqlite":  # shift the stored locked_at in Python
            found = self._run("locked_at", {}, "row")
            if found is None or found[0] is None:
                return 0
            held_at = found[0]
            if isinstance(held_at, str):
                held_at = datetime.fromisoformat(held_at)
            now = datetime.now(UTC).replace(tzinfo=None)
            given["until"] = max(held_at + self.job.min_hold, now).strftime(SQLITE_STAMP)
        return int(self._run("release", given))

    def reusable(self) -> bool:
        """Released cleanly (the lease was still ours): fit for another attempt."""
        return not (self.held or self.lost_before_release)

    def close(self) -> None:
        """Close the connection and dispose of the engine."""
        conn, self._conn = self._conn, None
        close_quietly(conn)
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _prepare_if_direct(dbapi: Any) -> None:
    """Let a direct PostgreSQL connection prepare the lease statements it repeats (not a pooled
    one: see connect.prepare_if_direct). One round trip per new connection."""
    server_port, client_port = dbapi.execute(sqlfiles.load("select_pooler_ports")).fetchone()
    prepare_if_direct(dbapi, server_port, client_port)


def _driver_errors(dialect: str) -> tuple[type[BaseException], ...]:
    """The raw driver's errors (the hot path runs statements on the DB-API connection)."""
    if dialect == "postgresql":
        import psycopg

        return (psycopg.Error,)
    if dialect == "mysql":
        import pymysql

        return (pymysql.MySQLError, OSError)
    return (sqlite3.Error,)


def _add_timeouts(engine: Any, dialect: str) -> None:
    """Bound every network wait, so a dead server makes a call fail instead of hang."""
    from sqlalchemy import event

    @event.listens_for(engine, "do_connect")
    def _timeouts(_dialect: Any, _rec: Any, _cargs: Any, cparams: dict[str, Any]) -> None:
        if dialect == "postgresql":
            cparams.setdefault("keepalives", 1)
            cparams.setdefault("keepalives_idle", 10)
            cparams.setdefault("keepalives_interval", 5)
            cparams.setdefault("keepalives_count", 3)
            cparams.setdefault("tcp_user_timeout", READ_TIMEOUT * 1000)
        elif dialect == "mysql":
            cparams.setdefault("read_timeout", READ_TIMEOUT)
            cparams.setdefault("write_timeout", READ_TIMEOUT)
