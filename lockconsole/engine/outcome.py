"""An attempt's outcome written to the ledger when its merged finish did not write it: retried
while the database is away, on the lock's own connection when the ledger's is gone, and, when
another instance closed the attempt as abandoned meanwhile, that close kept and the attempt's
real end added to it. Also the job's output tail, kept beside its run."""

from __future__ import annotations

import logging

from lockconsole.backends import Lock
from lockconsole.backends.ledger.outputs import keep_output
from lockconsole.backends.ledger.store import Ledger
from lockconsole.engine.closing import (
    DEADLINES,
    borrow_lock_connection,
    cut_ledger_loose,
    retrying,
)
from lockconsole.model.errors import DatabaseError, LedgerDenied
from lockconsole.model.jobs import Job, Run, evolve

log = logging.getLogger(__name__)
_CLOSED_BY_OTHER = "another instance took the lock and closed this attempt as lock_lost"


def record_outcome(
    ledger: Ledger,
    job: Job,
    run: Run,
    lock: Lock | None,
    outcome: str,
    exit_code: int | None,
    message: str | None,
    *,
    lost: bool,
) -> Run:
    """Write the outcome (retried while the database is away); RunClosedError if another
    instance closed the attempt first (see closed_by_other). With `lost` (the lock's connection
    went silent), a write with no answer in the job's check_timeout is cut loose and made on a
    fresh one."""

    def write() -> Run:
        if not lost:
            return ledger.finish(run, outcome, exit_code=exit_code, message=message)
        # the peer that silenced the lock's connection may hold the ledger's as well
        with DEADLINES.bound(job.check_timeout, lambda: cut_ledger_loose(ledger)):
            return ledger.finish(run, outcome, exit_code=exit_code, message=message)

    try:
        return retrying(write)
    except DatabaseError:
        if lock is None or not borrow_lock_connection(ledger, lock):
            raise
        log.warning("recording the outcome of %s on the lock's connection", job.name)
        return write()


def closed_by_other(ledger: Ledger, run: Run, exit_code: int | None) -> Run:
    """Another instance closed this attempt as abandoned: lock_lost, adding its real end."""
    end = ledger.now()
    try:
        ledger.update(
            "extend_lost_run",
            {
                "id": run.id,
                "instance": run.instance,
                "pid": run.pid,
                "finished_at": end,
                "exit_code": exit_code,
            },
        )
    except DatabaseError as exc:
        log.warning("could not add the real end of run %s: %s", run.id, exc)
    return evolve(
        run, outcome="lock_lost", finished_at=end, exit_code=exit_code, message=_CLOSED_BY_OTHER
    )


def keep_run_output(ledger: Ledger, run: Run, output: str | None, cut: int) -> None:
    """Keep the job's output tail with its run (a failure is logged: the outcome stands)."""
    if not output or run.id is None:
        return
    try:
        keep_output(ledger, run.id, output, cut)
    except (DatabaseError, LedgerDenied) as exc:
        log.warning("could not keep the output of run %s: %s", run.id, exc)
