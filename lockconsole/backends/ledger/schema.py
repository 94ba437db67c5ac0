"""The run ledger's table, defined once with SQLAlchemy Core (imported only when it is built).

See `ledger` for how each dialect stores the timestamps.
"""

from __future__ import annotations

from functools import cache
from typing import Any

TABLE = "lockconsole_runs"


@cache
def schema() -> tuple[Any, Any]:
    """(metadata, table) of the run ledger, built on first call (this imports SQLAlchemy)."""
    from sqlalchemy import (
        BigInteger,
        Column,
        DateTime,
        Index,
        Integer,
        MetaData,
        String,
        Table,
        Text,
        TypeDecorator,
    )
    from sqlalchemy.dialects import mysql, postgresql

    from lockconsole.backends.ledger.store import from_db, to_db

    class UTCDateTime(TypeDecorator):
        """timestamptz / naive-UTC DATETIME(6) / text, read back as aware UTC."""

        impl = DateTime
        cache_ok = True

        def load_dialect_impl(self, dialect: Any) -> Any:
            if dialect.name == "postgresql":
                return dialect.type_descriptor(postgresql.TIMESTAMP(timezone=True))
            if dialect.name in ("mysql", "mariadb"):
                return dialect.type_descriptor(mysql.DATETIME(fsp=6))
            return dialect.type_descriptor(Text())

        def process_bind_param(self, value: Any, dialect: Any) -> Any:
            return to_db(value, _dialect_of(dialect.name))

        def process_result_value(self, value: Any, dialect: Any) -> Any:
            return from_db(value)

    big = BigInteger().with_variant(Integer, "sqlite")
    metadata = MetaData()
    table = Table(
        TABLE,
        metadata,
        Column("id", big, primary_key=True, autoincrement=True),
        Column("job", String(128), nullable=False),
        Column("slot", UTCDateTime(), nullable=False),
        Column("instance", String(255), nullable=False),
        Column("host", String(255), nullable=False),
        Column("pid", Integer, nullable=False),
        Column("trigger", String(16), nullable=False),
        Column("outcome", String(16), nullable=False),
        Column("started_at", UTCDateTime(), nullable=False),
        Column("finished_at", UTCDateTime(), nullable=True),
        Column("exit_code", Integer, nullable=True),
        Column("message", Text, nullable=True),
        Column("fencing_token", BigInteger, nullable=True),
        Column("session_id", BigInteger, nullable=True),
        Column("strategy", String(16), nullable=True),
        Column("lock_key", String(255), nullable=True),
        Index("ix_lockconsole_runs_job_slot", "job", "slot"),
        Index("ix_lockconsole_runs_started_at", "started_at"),
    )
    return metadata, table


def _dialect_of(name: str) -> str:
    return "mysql" if name in ("mysql", "mariadb") else name
