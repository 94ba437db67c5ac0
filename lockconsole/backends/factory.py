"""open_lock: the lock object for a job's strategy (each backend is imported on first use);
open_inspector: the console's holder lister of one database (or one lease table);
merged_for: the merged statements of an attempt on that lock, where there are any;
fence: the fencing token of a lock whose store can forget its counter, issued by the ledger."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lockconsole.backends import Lock
from lockconsole.model.jobs import Database, Job

if TYPE_CHECKING:
    from lockconsole.backends.connect import Timeouts
    from lockconsole.backends.inspect import Inspector
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.backends.merged import Merged


def open_lock(job: Job, database: Database, *, instance: str, application_name: str) -> Lock:
    """The lock object for `job`'s strategy, connected to `database`."""
    if job.strategy == "pg-session":
        from lockconsole.backends.postgres.lock import PgSessionLock

        return PgSessionLock(job, database, application_name=application_name)
    if job.strategy == "pg-xact":
        from lockconsole.backends.postgres.lock import PgXactLock

        return PgXactLock(job, database, application_name=application_name)
    if job.strategy == "mysql":
        from lockconsole.backends.mysql.lock import MysqlLock

        return MysqlLock(job, database)
    if job.strategy == "lease":
        from lockconsole.backends.lease.lock import LeaseLock

        return LeaseLock(job, database, owner=instance)
    if job.strategy == "redis":
        from lockconsole.backends.redis.lock import RedisLock

        return RedisLock(job, database, owner=instance)
    raise ValueError(f"unknown strategy {job.strategy!r}")


def merged_for(lock: Lock, database: Database, ledger_database: Database) -> Merged | None:
    """The merged statements for this lock and ledger, or None where they do not apply."""
    if lock.strategy in ("pg-session", "pg-xact"):
        from lockconsole.backends.postgres.merged import for_postgres

        return for_postgres(lock, database, ledger_database)
    same = database.shares_connection(ledger_database)
    if lock.strategy == "lease" and same and database.url.dialect == "postgresql":
        # the lease strategy is built on SQLAlchemy: imported only for a lease job
        from lockconsole.backends.lease.merged import LeaseMerged
        from lockconsole.backends.postgres.merged import pipelines

        return LeaseMerged(lock) if pipelines() else None  # type: ignore[arg-type]
    if lock.strategy == "mysql" and same:
        from lockconsole.backends.mysql.lock import MysqlLock
        from lockconsole.backends.mysql.merged import MysqlMerged

        if type(lock) is MysqlLock and lock.multi_statements:
            return MysqlMerged(lock)
    return None


def fence(lock: Lock, ledger: Ledger) -> None:
    """Give a held Redis lock its fencing token from the ledger, before the attempt is recorded.

    Redis loses its own counter with a FLUSHALL or a restart without persistence, so the ledger
    issues the token (backends/redis/fencing.py). The other strategies' tokens come with the
    acquisition itself: a lease's from its row, and the session locks have none.
    """
    if lock.strategy == "redis":
        lock.issue_token(ledger)  # type: ignore[attr-defined]


def open_inspector(database: Database, table: str | None, timeouts: Timeouts) -> Inspector:
    """Who holds locks in `database` (in its lease `table` when one is named), and release."""
    if table is not None:
        from lockconsole.backends.lease.inspect import LeaseInspector

        return LeaseInspector(database, table, timeouts=timeouts)
    if database.url.dialect == "redis":
        from lockconsole.backends.redis.inspect import RedisInspector

        return RedisInspector(database, timeouts=timeouts)
    if database.url.dialect == "postgresql":
        from lockconsole.backends.postgres.inspect import PgInspector

        return PgInspector(database, timeouts=timeouts)
    from lockconsole.backends.mysql.inspect import MysqlInspector

    return MysqlInspector(database, timeouts=timeouts)
