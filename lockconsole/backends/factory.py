"""open_lock: the lock object for a job's strategy (each backend is imported on first use)."""

from __future__ import annotations

from lockconsole.backends import Lock
from lockconsole.model.jobs import Database, Job


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
