"""Attempts left "acquired" whose lock is free: found, checked afresh, closed as lock_lost.

A runner writes its outcome while it still holds its lock and releases only afterwards, so an
attempt that is still "acquired" while its recorded session (or lease token) no longer holds
the job's lock has lost it: its process was killed, its session was terminated, or its lease
ran out. Whoever sees one (the console's refresh, `check`, the alerts) closes it:

1. the holders just listed are a first filter: a holder with the run's session id (or a lease
   row with its owner and token) means the run is alive, and nothing more is asked;
2. otherwise the lock is checked afresh on the job's database, for that session id or lease
   token (pg_locks, IS_USED_LOCK, the lease row);
3. only if it is free is the row closed, by an UPDATE conditional on the row still being
   "acquired" with that same session id and token: a run that finished meanwhile keeps its
   own outcome, and a live run (whose session holds the lock) is never touched.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING

from lockconsole.backends.recheck import lock_free
from lockconsole.console.snapshot.reports import format_slot
from lockconsole.model.jobs import Database, Job, Run
from lockconsole.model.views import Alert, Holder

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger

log = logging.getLogger(__name__)
MAX_CHECKS = 20  # fresh checks per sweep (each opens a connection to the job's database)
NOTE = "abandoned: its lock was found free while the attempt was still marked acquired"


def alive_in(run: Run, holders: Iterable[Holder]) -> bool:
    """A listed holder is this run's session (or its lease, with its token)."""
    for h in holders:
        if not h.granted or h.job != run.job:
            continue
        if run.strategy == "lease":
            if h.locked_by == run.instance and h.fencing_token == run.fencing_token:
                return True
        elif run.session_id is not None and h.pid == run.session_id:
            return True
    return False


def sweep(
    runs: list[Run],
    holders: Iterable[Holder],
    jobs: Mapping[str, Job],
    database_of: Callable[[Job], Database | None],
    ledger_of: Callable[[Job], Ledger],
    *,
    close: bool,
    now: datetime,
) -> tuple[list[Run], list[Alert]]:
    """Close (when `close`) the attempts left acquired with their lock free; the runs as they
    are now, and one "abandoned" alert per attempt found."""
    held = list(holders)
    found: dict[int, Run] = {}
    alerts: list[Alert] = []
    checks = 0
    for run in runs:
        job = jobs.get(run.job)
        if run.outcome != "acquired" or run.id is None or job is None or alive_in(run, held):
            continue
        database = database_of(job)
        if database is None or checks >= MAX_CHECKS:
            continue
        checks += 1
        if lock_free(job, database, run) is not True:
            continue
        where = f"{run.job} {format_slot(run.slot)}: run {run.id} on {run.instance}"
        if not close:
            alerts.append(
                Alert(
                    "abandoned",
                    run.job,
                    f"{where} is marked acquired but its lock is free (not closed: read-only)",
                    run.slot,
                    subject=f"run {run.id} on {run.instance}",
                )
            )
            continue
        # no finished_at: when it ended is unknown (a killed process ran no further than its
        # lock, and one still running adds its real end when its own outcome write fails)
        params = {
            "id": run.id,
            "finished_at": None,
            "message": NOTE,
            "session_id": _or_none(run.session_id),
            "fencing_token": _or_none(run.fencing_token),
        }
        try:
            changed = ledger_of(job).update("close_abandoned_run", params)
        except Exception as exc:  # a viewer account may not UPDATE the ledger: still report it
            log.warning("closing abandoned run %s failed: %s", run.id, exc)
            alerts.append(
                Alert(
                    "abandoned",
                    run.job,
                    f"{where} is marked acquired but its lock "
                    "is free (could not close it: see the log)",
                    run.slot,
                    subject=f"run {run.id} on {run.instance}",
                )
            )
            continue
        if changed == 1:
            found[run.id] = replace(run, outcome="lock_lost", message=NOTE)
            alerts.append(
                Alert(
                    "abandoned",
                    run.job,
                    f"{where} was left acquired with its lock free: closed as lock_lost",
                    run.slot,
                    subject=f"run {run.id} on {run.instance}",
                )
            )
    return [found.get(r.id or -1, r) for r in runs], alerts


def _or_none(value: int | None) -> int:
    """What COALESCE(column, -1) compares with (ids and tokens are never negative)."""
    return -1 if value is None else value
