"""The audit log: every force-release and every trigger, in a SQL database, and in the log.

A release or a trigger first writes its audit row ("attempted"); if that write fails the
action is not performed. The row is then updated with the result. A release is audited in the
database it acts on (Redis: the ledger's), a trigger in its job's ledger database. A table
from before the `job` column gains it on first use.

    audit = AuditLog(database, job="nightly_billing")
    entry = audit.begin(actor, "trigger", "job nightly_billing on instance web-1")
    ...; audit.finish(entry, "succeeded", "exit 0")
"""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from lockconsole.config.urls import redact, scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database
from lockconsole.model.slots import utcnow
from lockconsole.model.views import AuditEntry  # noqa: F401  (public here too)

if TYPE_CHECKING:
    from lockconsole.backends.connect import Timeouts

log = logging.getLogger(__name__)
TABLE = "lockconsole_audit"


@dataclass(frozen=True)
class Actor:
    """Who asks for a mutation: the OS user and host of the operator."""

    os_user: str
    host: str

    def __str__(self) -> str:
        return f"{self.os_user}@{self.host}"

    @classmethod
    def current(cls) -> Actor:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(user, socket.gethostname())


def _table(metadata: Any) -> Any:
    from sqlalchemy import BigInteger, Column, DateTime, Integer, String, Table, Text

    return Table(
        TABLE,
        metadata,
        Column(
            "id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True
        ),
        Column("at", DateTime(timezone=True), nullable=False),
        Column("os_user", String(128), nullable=False),
        Column("host", String(255), nullable=False),
        Column("action", String(32), nullable=False),
        Column("database_name", String(128), nullable=False),
        Column("target", Text, nullable=False),
        Column("result", String(32), nullable=False),
        Column("message", Text),
        Column("job", String(128)),  # the job the target belongs to, when known
    )


def _server_now(dialect: str) -> Any:
    """The row's time: the server's clock (SQLite's is this host's), as for the run ledger."""
    from sqlalchemy import func

    if dialect == "postgresql":
        return func.clock_timestamp()
    if dialect == "mysql":  # naive UTC, as every other time this table holds
        return func.utc_timestamp(6)
    return utcnow()


class AuditLog:
    """Audit rows in one database's `lockconsole_audit` table (created on first use)."""

    def __init__(
        self,
        database: Database,
        *,
        job: str | None = None,
        read_only: bool = False,
        timeouts: Timeouts | None = None,
    ) -> None:
        from sqlalchemy import MetaData

        from lockconsole.backends.sa import engine_for

        self.database = database
        self.job = job  # written into every row begun here
        self.read_only = read_only  # reads what exists: never creates the table
        self.engine = engine_for(database.url, dedicated=True, timeouts=timeouts)
        self.table = _table(MetaData())
        self._created = False

    def ensure(self) -> None:
        """Create the audit table if it is missing, and add the job column an older one lacks."""
        if not self._created:
            from sqlalchemy import inspect

            from lockconsole.backends.sa import add_column_ddl

            self.table.create(self.engine, checkfirst=True)
            have = {c["name"] for c in inspect(self.engine).get_columns(TABLE)}
            if "job" not in have:  # an audit table from before the job column
                with self.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as c:
                    try:
                        c.exec_driver_sql(add_column_ddl(c.dialect, self.table.c.job))
                    except Exception:  # another process added it meanwhile
                        have = {col["name"] for col in inspect(self.engine).get_columns(TABLE)}
                        if "job" not in have:
                            raise
            self._created = True

    def begin(self, actor: Actor, action: str, target: str) -> int:
        """Write the 'attempted' row; raises DatabaseError if it cannot (then do nothing)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            self.ensure()
            with self.engine.begin() as conn:
                result = conn.execute(
                    self.table.insert().values(
                        at=_server_now(self.database.url.dialect),
                        os_user=actor.os_user,
                        host=actor.host,
                        action=action,
                        database_name=self.database.name,
                        target=redact(target),
                        result="attempted",
                        job=self.job,
                    )
                )
                key = result.inserted_primary_key
                if key is None:  # an INSERT of one row into a table with a primary key has one
                    raise DatabaseError(f"audit log on {self.database.url.masked}: no row id")
                entry_id = int(key[0])
        except SQLAlchemyError as exc:
            msg = scrub(str(exc).splitlines()[0], self.database.url)
            raise DatabaseError(
                f"audit log on {self.database.url.masked} cannot be written, so nothing was "
                f"done: {msg}"
            ) from None
        log.warning(
            "audit id=%s action=%s target=%r by=%s@%s result=attempted",
            entry_id,
            action,
            target,
            actor.os_user,
            actor.host,
        )
        return entry_id

    def finish(self, entry_id: int, result: str, message: str | None = None) -> None:
        """Record the result; a failure here is logged (the action already happened)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            with self.engine.begin() as conn:
                conn.execute(
                    self.table.update()
                    .where(self.table.c.id == entry_id)
                    .values(result=result, message=None if message is None else redact(message))
                )
        except SQLAlchemyError as exc:
            log.error(
                "audit id=%s result %s not recorded: %s",
                entry_id,
                result,
                scrub(str(exc).splitlines()[0], self.database.url),
            )
        log.warning("audit id=%s result=%s message=%r", entry_id, result, message)

    def entries(
        self, limit: int = 100, *, job: str | None = None, since: datetime | None = None
    ) -> list[AuditEntry]:
        """The newest rows first: of one job or all, at or after `since`."""
        from sqlalchemy.exc import SQLAlchemyError

        t = self.table
        query = t.select()
        if job is not None:
            query = query.where(t.c.job == job)
        if since is not None:
            query = query.where(t.c.at >= since)
        try:
            if self.read_only:
                from sqlalchemy import inspect

                if not inspect(self.engine).has_table(TABLE):
                    return []  # nothing was ever audited here
            else:
                self.ensure()
            with self.engine.connect() as conn:
                rows = conn.execute(query.order_by(t.c.at.desc(), t.c.id.desc()).limit(limit)).all()
        except SQLAlchemyError as exc:
            msg = scrub(str(exc).splitlines()[0], self.database.url)
            raise DatabaseError(f"audit log on {self.database.url.masked}: {msg}") from None
        return [
            AuditEntry(
                r.id,
                r.at if r.at.tzinfo is not None else r.at.replace(tzinfo=UTC),
                r.os_user,
                r.host,
                r.action,
                r.database_name,
                r.target,
                r.result,
                r.message,
                r.job,
            )
            for r in rows
        ]

    def close(self) -> None:
        self.engine.dispose()


def audited_trigger(
    database: Database, actor: Actor, job: str, instance: str, act: Callable[[], Any]
) -> Any:
    """Audit a trigger of `job` (the row first: when it cannot be written, nothing runs), run
    `act` (it returns the Run), and record how the run ended."""
    audit = AuditLog(database, job=job)
    try:
        entry = audit.begin(actor, "trigger", f"job {job} on instance {instance}")
        try:
            run = act()
        except BaseException as exc:
            audit.finish(entry, "error", " ".join(str(exc).split()) or type(exc).__name__)
            raise
        code = f" (exit {run.exit_code})" if run.exit_code is not None else ""
        message = f"run {run.id}{code}" + (f": {run.message}" if run.message else "")
        audit.finish(entry, run.outcome, message)
        return run
    finally:
        audit.close()
