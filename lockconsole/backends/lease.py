"""ShedLock-compatible leases: a row per name in a lease table, held until `lock_until`.

Acquire, check and release each run in one short transaction on a dedicated connection and
follow ShedLock's `usingDbTime()` statements (FACTS 9.2-9.4), so lockconsole and ShedLock apps
exclude each other on the same table. Our extra nullable `fencing_token` column grows with
every acquisition of a name; on a table without it (created by ShedLock) the token is None.
SQLite has no server clock, so there the Python UTC clock stands in for the database's.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import DateTime, Table, case, func, insert, literal, select, update
from sqlalchemy.dialects import postgresql
from sqlalchemy.exc import SQLAlchemyError

from ..errors import ConfigError, DatabaseError
from ..models import Database, Job
from ..urls import scrub
from .connect import first_line
from .lease_table import FENCING, db_now, ensure_lease_table, lease_table, plus
from .sa import engine_for

DEFAULT_MAX_DURATION = timedelta(hours=1)  # models/config always set it for leases
READ_TIMEOUT = 30  # seconds: a MySQL statement that long means the connection is gone


class LeaseLock:
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
        self._has_fencing: bool | None = None
        self._table: Table | None = None
        self._engine: Any = None
        self._conn: Any = None

    # -- connection -------------------------------------------------------------------------

    def _error(self, exc: BaseException) -> DatabaseError:
        """A one-line DatabaseError naming the masked URL, never a password."""
        orig = getattr(exc, "orig", None) or exc
        url = self.database.url
        return DatabaseError(f"{url.masked}: lease {self.name}: {scrub(first_line(orig), url)}")

    def _connection(self) -> Any:
        """The dedicated connection, opened (and the table checked) on first use."""
        if self._engine is None:
            self._engine = engine_for(self.database.url, dedicated=True)
            _add_timeouts(self._engine, self.dialect)
        if self._conn is None:
            self._conn = self._engine.connect()
        if self._table is None:
            table_name = self.job.lease_table
            try:
                self._has_fencing = ensure_lease_table(self._conn, table_name, self.dialect)
            except ValueError as exc:
                raise DatabaseError(f"{self.database.url.masked}: {exc}") from None
            self._table = lease_table(table_name, self.dialect, fencing=self._has_fencing)
        return self._conn

    def _drop_connection(self) -> None:
        """Forget a broken connection (the next call opens a new one)."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.invalidate()
                conn.close()
            except Exception:
                pass

    # -- the Lock protocol ------------------------------------------------------------------

    def acquire(self) -> bool:
        """ShedLock's acquire: insert the row if absent, else take it when lock_until <= now."""
        try:
            conn = self._connection()
            got, token = self._acquire(conn, self._table)  # type: ignore[arg-type]
        except SQLAlchemyError as exc:
            self._drop_connection()
            raise self._error(exc) from None
        if got:  # a refusal leaves an earlier hold of this object as it was
            self.held, self.fencing_token, self.lost_before_release = True, token, False
        return got

    def _acquire(self, conn: Any, t: Table) -> tuple[bool, int | None]:
        """(won, fencing token) with each statement in its own short transaction."""
        fencing = self._has_fencing
        max_duration = self.job.max_duration or DEFAULT_MAX_DURATION
        now = db_now(self.dialect)
        until = plus(now, max_duration, self.dialect)
        taken: dict[str, Any] = {"lock_until": until, "locked_at": now, "locked_by": self.owner}
        row = dict(taken, name=self.name)
        if fencing:
            row[FENCING] = 1
            taken[FENCING] = func.coalesce(t.c[FENCING], 0) + 1
        back = t.c[FENCING] if fencing else t.c.name
        if self.dialect == "postgresql":
            stmt = postgresql.insert(t).values(row)
            stmt = stmt.on_conflict_do_update(
                index_elements=[t.c.name], set_=taken, where=t.c.lock_until <= now
            ).returning(back)
            with conn.begin():
                found = conn.execute(stmt).first()
            return found is not None, (found[0] if found and fencing else None)
        ignore = "IGNORE" if self.dialect == "mysql" else "OR IGNORE"
        with conn.begin():
            if conn.execute(insert(t).prefix_with(ignore).values(row)).rowcount == 1:
                return True, (1 if fencing else None)
        now = db_now(self.dialect)  # SQLite: a fresh Python clock reading
        taken.update(locked_at=now, lock_until=plus(now, max_duration, self.dialect))
        take = update(t).where(t.c.name == self.name, t.c.lock_until <= now).values(taken)
        with conn.begin():
            if conn.execute(take).rowcount != 1:
                return False, None
            if not fencing:
                return True, None
            token = conn.execute(select(t.c[FENCING]).where(t.c.name == self.name)).scalar()
            return True, token

    def still_held(self) -> bool:
        """True while our row has our owner (and token) and lock_until > now; never raises."""
        if not self.held:
            return False
        for attempt in (1, 2):
            try:
                return self._check(self._connection(), self._table)  # type: ignore[arg-type]
            except (SQLAlchemyError, DatabaseError):
                self._drop_connection()
                if attempt == 2:
                    return False
        return False

    def _check(self, conn: Any, t: Table) -> bool:
        """One short read of the row in the database clock."""
        now = db_now(self.dialect)
        query = select(t.c.name).where(
            t.c.name == self.name, t.c.locked_by == self.owner, t.c.lock_until > now
        )
        if self._has_fencing:
            query = query.where(t.c[FENCING] == self.fencing_token)
        with conn.begin():
            return conn.execute(query).first() is not None

    def release(self) -> None:
        """ShedLock's unlock: lock_until = max(now, locked_at + min_hold); never DELETE."""
        if not self.held:
            return
        self.held = False
        for attempt in (1, 2):  # a dropped connection is reopened once; the UPDATE is idempotent
            try:
                changed = self._release(self._connection(), self._table)  # type: ignore[arg-type]
            except SQLAlchemyError as exc:
                self._drop_connection()
                if attempt == 2:
                    raise self._error(exc) from None
            else:
                self.lost_before_release = changed != 1
                return

    def _release(self, conn: Any, t: Table) -> int:
        """The unlock UPDATE guarded by owner (and fencing token); the affected row count."""
        now = db_now(self.dialect)
        if self.dialect == "sqlite":  # no date arithmetic: shift the stored locked_at in Python
            with conn.begin():
                held_at = conn.execute(select(t.c.locked_at).where(t.c.name == self.name)).scalar()
            if held_at is None:
                return 0
            hold_until: Any = literal(held_at + self.job.min_hold, DateTime())
        else:
            hold_until = plus(t.c.locked_at, self.job.min_hold, self.dialect)
        until = case((hold_until > now, hold_until), else_=now)
        stmt = update(t).where(t.c.name == self.name, t.c.locked_by == self.owner)
        if self._has_fencing:
            stmt = stmt.where(t.c[FENCING] == self.fencing_token)
        with conn.begin():
            return int(conn.execute(stmt.values(lock_until=until)).rowcount)

    def close(self) -> None:
        """Close the connection and dispose of the engine."""
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


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
