"""ShedLock lease tables: list held leases, and force-release one by expiring its row.

A row is held while `lock_until > now` in the database's UTC clock (a zone-less UTC TIMESTAMP),
as ShedLock's `usingDbTime()` and lockconsole's own leases write it. Release is ShedLock's
unlock with `lock_until = now`, guarded by name, locked_by and the fencing token (or, on a
table without that column, the `locked_at` that was listed); the row is never deleted.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import Connection, Engine, Table, select, update
from sqlalchemy.exc import SQLAlchemyError

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.connect import Timeouts, first_line
from lockconsole.backends.inspect import (
    HolderList,
    ReleaseResult,
    ReleaseStatus,
    audited_release,
)
from lockconsole.backends.lease.table import (
    FENCING,
    SHEDLOCK_COLUMNS,
    db_now,
    lease_table,
    table_columns,
)
from lockconsole.backends.sa import engine_for
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job
from lockconsole.model.views import Holder


class LeaseInspector:
    """Held rows of one ShedLock-style lease table, and a guarded expire of one row."""

    def __init__(
        self, database: Database, table: str = "shedlock", *, timeouts: Timeouts | None = None
    ) -> None:
        self.database, self.table = database, table
        self.timeouts = timeouts  # None: engine_for's defaults
        self.dialect = database.url.dialect
        self._engine: Engine | None = None
        self._table: Table | None = None

    def _engine_(self) -> Engine:
        """The engine, created on first use (NullPool: nothing lingers between refreshes)."""
        if self._engine is None:
            self._engine = engine_for(self.database.url, dedicated=True, timeouts=self.timeouts)
        return self._engine

    def _describe(self, exc: BaseException) -> str:
        """The driver error's first line, with any password scrubbed."""
        orig = getattr(exc, "orig", None) or exc
        return scrub(first_line(orig), self.database.url)

    def _error(self, what: str, exc: BaseException) -> DatabaseError:
        """A one-line DatabaseError naming the masked URL, never a password."""
        return DatabaseError(f"{self.database.url.masked}: {what}: {self._describe(exc)}")

    def _lease_table(self, conn: Connection) -> tuple[Table | None, str | None]:
        """The table as found (with fencing_token when it has one), or None and why not."""
        if self._table is not None:
            return self._table, None
        columns = table_columns(conn, self.table)
        if columns is None:
            return None, f"lease table {self.table} does not exist (yet): no leases held"
        missing = [c for c in SHEDLOCK_COLUMNS if c not in columns]
        if missing:
            return None, f"{self.table} is not a lease table: no column(s) {', '.join(missing)}"
        self._table = lease_table(self.table, self.dialect, fencing=FENCING in columns)
        return self._table, None

    def holders(self, jobs: Sequence[Job]) -> HolderList:
        """Rows with lock_until > now (database clock), mapped to this table's lease jobs."""
        names = {
            str(j.key.value): j.name
            for j in jobs
            if j.strategy == "lease"
            and j.database == self.database.name
            and j.lease_table == self.table
        }
        try:
            with self._engine_().connect() as conn:
                t, problem = self._lease_table(conn)
                if t is None:
                    return HolderList((), self.table, (problem or "",))
                now = db_now(self.dialect)
                columns = [t.c[c] for c in (*SHEDLOCK_COLUMNS, FENCING) if c in t.c]
                query = select(*columns)
                query = query.where(t.c.lock_until > now).order_by(t.c.name)
                with conn.begin():
                    rows = conn.execute(query).mappings().all()
        except SQLAlchemyError as exc:
            self._table = None  # look at the table again next time
            raise self._error(f"listing leases in {self.table} failed", exc) from None
        holders = tuple(
            Holder(
                database=self.database.name,
                kind="lease",
                key=r["name"],
                key_kind="name",
                granted=True,
                source=self.table,
                job=names.get(r["name"]),
                held_since=_utc(r["locked_at"]),
                state="held",
                state_since=_utc(r["locked_at"]),
                lock_until=_utc(r["lock_until"]),
                locked_by=r["locked_by"],
                fencing_token=r.get(FENCING),
            )
            for r in rows
        )
        return HolderList(holders, self.table)

    def release(self, holder: Holder, *, actor: Actor, audit: AuditLog) -> ReleaseResult:
        """Expire the row (lock_until = now) only if it is still this holder's; audited first."""
        if holder.kind != "lease" or holder.database != self.database.name:
            return ReleaseResult("error", "not a lease of this database", holder)
        if holder.source != self.table or holder.locked_by is None:
            return ReleaseResult("error", f"not a held lease of table {self.table}", holder)
        token = "" if holder.fencing_token is None else f" (fencing token {holder.fencing_token})"
        target = f"lease {holder.key!r} in {self.table} locked by {holder.locked_by!r}{token}"
        return audited_release(
            holder,
            target,
            lambda: self._expire_guarded(holder, target, token),
            actor=actor,
            audit=audit,
        )

    def _expire_guarded(self, holder: Holder, target: str, token: str) -> tuple[ReleaseStatus, str]:
        """The guarded expiry (only while the same holder holds it) as (status, message)."""
        try:
            changed = self._expire(holder)
        except (SQLAlchemyError, DatabaseError) as exc:
            return "error", f"expiring {target} failed: {self._describe(exc)}"
        if changed == 1:
            return "released", f"{target} expired; another instance can take it now"
        return "holder_changed", (
            f"holder changed: {holder.locked_by!r} no longer holds lease "
            f"{holder.key!r}{token}; nothing was done"
        )

    def _expire(self, holder: Holder) -> int:
        """ShedLock's unlock with lock_until = now, guarded; the number of rows changed."""
        with self._engine_().connect() as conn:
            t, problem = self._lease_table(conn)
            if t is None:
                raise DatabaseError(problem or f"no lease table {self.table}")
            now = db_now(self.dialect)
            stmt = update(t).where(
                t.c.name == holder.key, t.c.locked_by == holder.locked_by, t.c.lock_until > now
            )
            if FENCING in t.c and holder.fencing_token is not None:
                stmt = stmt.where(t.c[FENCING] == holder.fencing_token)
            elif holder.held_since is not None:  # no token: the acquisition we listed
                stmt = stmt.where(t.c.locked_at == holder.held_since.replace(tzinfo=None))
            with conn.begin():
                return int(conn.execute(stmt.values(lock_until=now)).rowcount)

    def close(self) -> None:
        """Dispose of the engine (idempotent)."""
        if self._engine is not None:
            self._engine.dispose()
            self._engine = None


def _utc(value: datetime | None) -> datetime | None:
    """A stored zone-less UTC timestamp as an aware UTC datetime."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
