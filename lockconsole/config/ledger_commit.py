"""Where a job's `ledger_commit = "async"` can take effect (checked once every job is read)."""

from __future__ import annotations

from collections.abc import Mapping

from lockconsole.model.jobs import LEDGER_COMMITS, Database, Job, LedgerCommit


def check(value: object) -> LedgerCommit:
    """The setting's value: "durable" (the default) or "async"."""
    for commit in LEDGER_COMMITS:
        if value == commit:
            return commit
    raise ValueError(f"must be {' or '.join(repr(c) for c in LEDGER_COMMITS)}, not {value!r}")


def async_problem(job: Job, databases: Mapping[str, Database], ledger: str | None) -> str | None:
    """Why `ledger_commit = "async"` cannot take effect for `job`, or None when it can (or the
    job keeps the default): it needs the ledger in the job's own PostgreSQL database, where a
    pg-session, pg-xact or lease attempt's ledger statements are merged with its lock's."""
    if job.ledger_commit != "async":
        return None
    ledger_name = ledger or job.database
    dialect = databases[ledger_name].url.dialect
    if dialect != "postgresql":
        return (
            f'"async" needs a PostgreSQL ledger, and {ledger_name!r} is {dialect} '
            "(MariaDB/MySQL and SQLite commit every ledger row durably)"
        )
    if job.strategy not in ("pg-session", "pg-xact", "lease"):
        return f'"async" applies to pg-session, pg-xact and lease jobs, not {job.strategy}'
    if not databases[ledger_name].shares_connection(databases[job.database]):
        return (
            f'"async" needs the ledger in the job\'s own database {job.database!r}, '
            f"not in ledger_database {ledger_name!r}"
        )
    return None
