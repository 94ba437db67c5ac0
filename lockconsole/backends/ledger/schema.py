"""The run ledger's tables as SQLAlchemy Core: runs (RUN_COLUMNS), controls (pauses), output,
requests, the fencing tokens the ledger issues for locks whose store can forget them, the
summaries of pruned slots that were not plain ok (retention/), and the holder journal (who was
seen holding which lock, when: journal.py).

See `store` for how each dialect stores the timestamps.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from lockconsole.model.errors import LedgerDenied
from lockconsole.model.jobs import RUN_COLUMNS

TABLE = "lockconsole_runs"
CONTROLS_TABLE = "lockconsole_controls"  # one row per paused job
REQUESTS_TABLE = "lockconsole_requests"  # runs asked of the fleet, and how they went
OUTPUT_TABLE = "lockconsole_run_output"  # the output tail of a run, when it had output
FENCING_TABLE = "lockconsole_fencing"  # per lock: the highest fencing token the ledger issued
SUMMARY_TABLE = "lockconsole_slot_summaries"  # per pruned slot that was not plain ok: its verdict
JOURNAL_TABLE = "lockconsole_holder_journal"  # one row per holding seen: who, which lock, when


@cache
def schema() -> tuple[Any, Any]:
    """(metadata, table) of the run ledger, built on first call (this imports SQLAlchemy)."""
    from sqlalchemy import (
        BigInteger,
        Column,
        DateTime,
        Double,
        Float,
        Index,
        Integer,
        MetaData,
        String,
        Table,
        Text,
        TypeDecorator,
        UniqueConstraint,
    )
    from sqlalchemy.dialects import mysql, postgresql

    from lockconsole.backends.ledger.timestamps import from_db, to_db

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

    def column(spec: Any) -> Any:
        if spec.type == "id":
            return Column(spec.name, big, primary_key=True, autoincrement=True)
        kinds: dict[str, Any] = {"int": Integer, "bigint": BigInteger, "time": UTCDateTime}
        kind = kinds.get(spec.type) or (Text if spec.size is None else String(spec.size))
        return Column(spec.name, kind, nullable=spec.nullable)

    columns = [column(spec) for spec in RUN_COLUMNS]
    metadata = MetaData()
    table = Table(
        TABLE,
        metadata,
        *columns,
        Index("ix_lockconsole_runs_job_slot", "job", "slot"),
        Index("ix_lockconsole_runs_started_at", "started_at"),
        # each job's newest attempt with an outcome (its last success) as one probe
        Index("ix_lockconsole_runs_job_outcome_slot", "job", "outcome", "slot"),
    )
    Table(
        CONTROLS_TABLE,
        metadata,
        Column("job", String(128), primary_key=True),
        Column("note", Text, nullable=False),
        Column("paused_by", String(255), nullable=False),
        Column("paused_at", UTCDateTime, nullable=False),
        Column("paused_until", UTCDateTime),
    )
    Table(
        OUTPUT_TABLE,
        metadata,
        Column(
            "run_id",
            BigInteger().with_variant(Integer, "sqlite"),
            primary_key=True,
            autoincrement=False,
        ),
        Column(
            "output", Text().with_variant(mysql.MEDIUMTEXT(), "mysql", "mariadb"), nullable=False
        ),
    )
    Table(
        REQUESTS_TABLE,
        metadata,
        Column("id", big, primary_key=True, autoincrement=True),
        Column("job", String(128), nullable=False),
        Column("slot", UTCDateTime),  # None: a manual run in its own slot
        Column("instance", String(255)),  # None: any instance serving the job
        Column("forced", Integer, nullable=False),  # 1: run even if the slot already succeeded
        Column("state", String(16), nullable=False),
        Column("served_by", String(255)),
        Column("run_id", BigInteger),
        Column("requested_by", String(255), nullable=False),
        Column("requested_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("expires_at", UTCDateTime, nullable=False),
        Column("reason", Text),
        Index("ix_lockconsole_requests_state", "state"),
    )
    Table(
        FENCING_TABLE,
        metadata,
        Column("lock_id", String(255), primary_key=True),
        Column("token", BigInteger, nullable=False),
    )
    Table(
        SUMMARY_TABLE,
        metadata,
        Column("job", String(128), primary_key=True),
        Column("slot", UTCDateTime, primary_key=True),
        Column("status", String(16), nullable=False),  # verdict.slot_status of its attempts
        Column("attempts", Integer, nullable=False),
        Column("instances", Integer, nullable=False),  # distinct instances that attempted it
        Column("overlap_seconds", Float, nullable=False),  # verdict.overlap_seconds
        Column("first_started_at", UTCDateTime, nullable=False),
        Column("last_finished_at", UTCDateTime),
        Column("pruned_at", UTCDateTime, nullable=False),  # the server's time of the prune
    )
    Table(
        JOURNAL_TABLE,
        metadata,
        Column("id", big, primary_key=True, autoincrement=True),
        Column("holding", String(40), nullable=False),  # the holder's identity, hashed
        # 1 while the holding is seen held, NULL once it is gone: with `holding` a unique key,
        # so samplers at once keep one open row per holding (NULLs never collide)
        Column("open_mark", Integer),
        Column("database_name", String(128), nullable=False),
        Column("kind", String(16), nullable=False),
        Column("source", String(64), nullable=False),
        Column("lock_key", String(255), nullable=False),
        Column("job", String(128)),
        Column("pid", BigInteger),
        Column("application", String(255)),
        Column("client", String(255)),
        Column("username", String(255)),
        Column("mode", String(64)),
        Column("locked_by", String(255)),
        Column("session_start", UTCDateTime),
        Column("seen_after", UTCDateTime),  # the last sample without it, before first_seen
        Column("first_seen", UTCDateTime, nullable=False),  # the first sample that saw it held
        Column("last_seen", UTCDateTime),  # the last sample that saw it held (NULL: still held)
        Column("gone_by", UTCDateTime),  # the first sample without it (NULL: still held)
        # seconds since the epoch of the earliest it can have been taken (seen_after, else
        # first_seen) and, once gone, the longest it can have been held: plain numbers, so the
        # close computes the span in every dialect and `--at` splits short holdings from long
        Column("from_epoch", Double, nullable=False),  # double: microseconds of a date kept
        Column("held_seconds", Double),
        UniqueConstraint("holding", "open_mark", name="uq_lockconsole_journal_open"),
        # the short holdings' window read in the index alone: its span and end are filtered
        # there, so only the rows that held then are fetched from the table
        Index("ix_lockconsole_journal_from", "from_epoch", "held_seconds", "gone_by"),
        Index("ix_lockconsole_journal_held", "held_seconds"),
        Index("ix_lockconsole_journal_open", "open_mark"),
        Index("ix_lockconsole_journal_gone", "gone_by"),
    )
    return metadata, table


def _dialect_of(name: str) -> str:
    return "mysql" if name in ("mysql", "mariadb") else name


def ensure(engine: Any) -> None:
    """Create the table and its indexes if they are missing, then add the columns an older
    ledger lacks (`migrate`)."""
    metadata, _ = schema()
    with engine.begin() as conn:
        metadata.create_all(conn, checkfirst=True)
    migrate(engine)


def migrate(engine: Any) -> list[str]:
    """Add the columns of RUN_COLUMNS an older ledger lacks; the names added.

    Only nullable columns without a default are ever added, which every dialect does without
    rewriting the table. Each ALTER runs on its own (autocommit); another instance adding the
    same column at the same time is fine: the column is there afterwards either way.
    """
    from sqlalchemy import inspect
    from sqlalchemy.exc import SQLAlchemyError

    from lockconsole.backends.sa import add_column_ddl

    _, table = schema()

    def present() -> set[str]:
        return {column["name"] for column in inspect(engine).get_columns(TABLE)}

    have = present()
    missing = [spec for spec in RUN_COLUMNS if spec.nullable and spec.name not in have]
    if not missing:
        return []
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for spec in missing:
            statement = add_column_ddl(conn.dialect, table.c[spec.name])
            try:
                conn.exec_driver_sql(statement)
            except SQLAlchemyError as exc:
                if spec.name in present():  # another instance added it meanwhile
                    continue
                said = " ".join(str(getattr(exc, "orig", None) or exc).split())
                raise LedgerDenied(
                    f"the run ledger {TABLE} lacks the column {spec.name} that this release "
                    f"records, and this account may not add it; its owner must run once: "
                    f"{statement} (the server said: {said})"
                ) from None
    return [spec.name for spec in missing]
