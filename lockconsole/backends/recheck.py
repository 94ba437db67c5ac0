"""A fresh check of one recorded holder: does the session (or lease token) that an attempt
recorded still hold its job's lock? Asked on the job's own database, on a connection of its
own, for an attempt still marked "acquired" that no listed holder accounts for."""

from __future__ import annotations

import logging

from lockconsole.backends import sqlfiles
from lockconsole.backends.connect import connect
from lockconsole.model.jobs import Database, Job, Run
from lockconsole.model.keys import pg_locks_identity

log = logging.getLogger(__name__)


def lock_free(job: Job, database: Database, run: Run) -> bool | None:
    """A fresh check: True when `run`'s session or lease no longer holds the job's lock, False
    when it does, None when it cannot be told (another key or strategy, an error)."""
    if run.strategy != job.strategy or run.lock_key != str(job.key):
        return None
    try:
        if job.strategy == "lease":
            return _lease_free(job, database, run)
        if run.session_id is None:
            return None
        conn = connect(database.url, application_name="lockconsole:abandoned-check")
        try:
            if job.strategy == "mysql":
                params = {"name": str(job.key.value), "pid": run.session_id}
                with conn.cursor() as cur:
                    cur.execute(sqlfiles.load("check_lock_of", "mysql"), params)
                    row = cur.fetchone()
            else:
                ident = dict(
                    zip(("classid", "objid", "objsubid"), pg_locks_identity(job.key), strict=True)
                )
                sql = sqlfiles.load("check_advisory_lock_of")
                row = conn.execute(sql, {**ident, "pid": run.session_id}).fetchone()
        finally:
            conn.close()
    except Exception as exc:
        log.debug("abandoned check of run %s failed: %s", run.id, exc)
        return None
    return not (row and row[0])


def _lease_free(job: Job, database: Database, run: Run) -> bool:
    from lockconsole.backends.lease.lock import LeaseLock

    lease = LeaseLock(job, database, owner=run.instance)
    try:
        lease.held, lease.fencing_token = True, run.fencing_token
        return not lease.still_held()
    finally:
        lease.held = False
        lease.close()
