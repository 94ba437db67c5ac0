"""The audit log: every force-release attempt, in the database it acts on, and in the log.

A release first writes its audit row ("attempted"); if that write fails the release is not
performed. The row is then updated with the result.
"""

from __future__ import annotations

import getpass
import logging
import socket
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lockconsole.config.urls import redact, scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database
from lockconsole.model.slots import utcnow

log = logging.getLogger("lockconsole.backends.audit")
TABLE = "lockconsole_audit"


@dataclass(frozen=True)
class Actor:
    """Who asks for a mutation: the OS user and host of the operator."""

    os_user: str
    host: str

    @classmethod
    def current(cls) -> Actor:
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "unknown"
        return cls(user, socket.gethostname())


@dataclass(frozen=True)
class AuditEntry:
    id: int
    at: datetime
    os_user: str
    host: str
    action: str
    database: str
    target: str
    result: str
    message: str | None


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
    )


class AuditLog:
    """Audit rows in one database's `lockconsole_audit` table (created on first use)."""

    def __init__(self, database: Database) -> None:
        from sqlalchemy import MetaData

        from lockconsole.backends.sa import engine_for

        self.database = database
        self.engine = engine_for(database.url, dedicated=True)
        self.table = _table(MetaData())
        self._created = False

    def _ensure(self) -> None:
        if not self._created:
            self.table.create(self.engine, checkfirst=True)
            self._created = True

    def begin(self, actor: Actor, action: str, target: str) -> int:
        """Write the 'attempted' row; raises DatabaseError if it cannot (then do nothing)."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            self._ensure()
            with self.engine.begin() as conn:
                result = conn.execute(
                    self.table.insert().values(
                        at=utcnow(),
                        os_user=actor.os_user,
                        host=actor.host,
                        action=action,
                        database_name=self.database.name,
                        target=redact(target),
                        result="attempted",
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

    def entries(self, limit: int = 100) -> list[AuditEntry]:
        self._ensure()
        t = self.table
        with self.engine.connect() as conn:
            rows = conn.execute(t.select().order_by(t.c.id.desc()).limit(limit)).all()
        return [
            AuditEntry(
                r.id,
                r.at,
                r.os_user,
                r.host,
                r.action,
                r.database_name,
                r.target,
                r.result,
                r.message,
            )
            for r in rows
        ]

    def close(self) -> None:
        self.engine.dispose()
