"""Run under a lock: begin an attempt (try the lock once, claim the slot, record), or skip it.

The attempt itself (watchdog, stop, finish, record) is engine/attempt.py's Attempt; here are the
exit codes of `lockconsole run` and the lock sessions an attempt opens or borrows.
"""

from __future__ import annotations

import logging
import os
import socket
from contextlib import nullcontext
from dataclasses import MISSING, fields
from datetime import datetime

from lockconsole.backends import Lock
from lockconsole.backends.factory import fence, merged_for, open_lock
from lockconsole.backends.ledger import clock as server_clock
from lockconsole.backends.ledger.pause_check import pause_of
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.merged import SKIP_HELD, Merged
from lockconsole.engine import faultpoints
from lockconsole.engine.attempt import Attempt, log_attempt
from lockconsole.engine.closing import DEADLINES, DECIDE_SECONDS, cut_loose
from lockconsole.engine.sessions import Session, SessionRegistry, give_back, session_key
from lockconsole.engine.stopping import Stop
from lockconsole.model.construct import construct
from lockconsole.model.errors import DatabaseError, RunClosedError
from lockconsole.model.jobs import Database, Job, Outcome, Run, Trigger, evolve
from lockconsole.model.slots import manual_slot, slot_for, utcnow

log = logging.getLogger(__name__)

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1  # the job failed; its own non-zero exit code is passed through unless reserved
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_LOCK_LOST = 4
EXIT_DATABASE = 5
RESERVED_EXIT_CODES = frozenset({EXIT_USAGE, EXIT_SKIPPED, EXIT_LOCK_LOST, EXIT_DATABASE})
_HOST = socket.gethostname()
# a Run's defaults: what an attempt's first Run starts from (every field, so it can be built
# without running the frozen dataclass's __init__)
_RUN_DEFAULTS = {f.name: f.default for f in fields(Run) if f.default is not MISSING}


def default_instance(configured: str | None = None) -> str:
    """--instance, else $LOCKCONSOLE_INSTANCE, else the config's, else the host name."""
    return os.environ.get("LOCKCONSOLE_INSTANCE") or configured or socket.gethostname()


def application_name(job: Job, instance: str) -> str:
    """What pg_stat_activity shows for our lock sessions (PostgreSQL keeps 63 bytes)."""
    return f"lockconsole:{job.name}@{instance}"[:63]


def exit_code_for(run: Run) -> int:
    """The documented exit code of `lockconsole run` for a finished attempt."""
    if run.outcome in ("skipped", "paused"):
        return EXIT_SKIPPED
    if run.outcome == "lock_lost":
        return EXIT_LOCK_LOST
    if run.outcome == "succeeded":
        return EXIT_SUCCEEDED
    code = run.exit_code or EXIT_FAILED
    return EXIT_FAILED if code in RESERVED_EXIT_CODES else code


def begin(
    job: Job,
    database: Database,
    ledger_database: Database,
    *,
    instance: str,
    slot: datetime | None = None,
    trigger: Trigger = "scheduled",
    sessions: SessionRegistry | None = None,
    stop: Stop | None = None,
    actor: str | None = None,
    force: bool = False,
) -> Attempt:
    """Try the lock once and record the attempt; the Attempt says whether to run.

    `actor` (who asked for a manual run, "os_user@host") goes into the ledger row.
    `force` runs a scheduled slot even if it already succeeded (once_per_slot is not asked).
    With `sessions`, the lock and ledger connections come from (and go back to) that registry,
    so repeated attempts in one process connect once; without, they are opened and closed here.
    With `stop`, a stop requested before the lock is tried raises Stopped (nothing is held or
    recorded); one requested once the lock is held records the attempt as failed and releases
    the lock before returning, so the job never starts.
    """
    faultpoints.reach(faultpoints.CONNECTING)
    if stop is not None:
        stop.check()
    fired = utcnow()  # the instance's clock names a scheduled slot: it is what fired it
    if slot is None and trigger != "manual":
        slot = slot_for(job, fired)
    key = session_key(job, database, ledger_database, instance) if sessions is not None else ()
    session = sessions.take(key) if sessions is not None else None
    if session is not None:
        lock, ledger = session.lock, session.ledger
        lock.job = job  # max_duration / min_hold may differ
    else:
        ledger = Ledger(ledger_database)
        try:
            with stop.interruptible() if stop is not None else nullcontext():
                lock = _open(job, database, instance)
        except BaseException:
            ledger.close()
            raise
        if sessions is None:
            _share_connection(job, lock, ledger, database, ledger_database)
    claims = job.once_per_slot and trigger in ("scheduled", "rerun") and not force
    opening = _Opening(job, database, ledger_database, instance, slot, trigger, actor, claims, stop)
    try:
        try:
            run, merged = opening.decide(lock, ledger)
        except DatabaseError:
            if session is None and not (sessions is not None and lock.gone()):
                raise
            # Nothing is held on a dead session, so the attempt starts again, once, on fresh
            # connections: a kept connection that died while idle (a server restart, a terminated
            # session, an idle timeout) or that a hung peer left without an answer (cut loose by
            # its deadline); and, in a process that keeps its sessions (schedule, run_once), a
            # fresh one the server ended in the middle of the try (its locks died with it), so a
            # long-lived runner outlives the fault. A one-shot `lockconsole run` reports that
            # one (exit 5): its caller's next firing is the retry.
            Session(key, lock, ledger).close()
            ledger = Ledger(ledger_database)
            with stop.interruptible() if stop is not None else nullcontext():
                lock = _open(job, database, instance)
            run, merged = opening.decide(lock, ledger)
    except BaseException:
        _close_quietly(lock)
        ledger.close()
        raise
    if run.outcome in ("skipped", "paused"):
        give_back(sessions, key, lock, ledger, keep=True)
        log_attempt(run.outcome, run)
        return Attempt(job, run, None, ledger)
    attempt = Attempt(
        job, run, lock, ledger, stopping=stop, sessions=sessions, session_key=key, merged=merged
    )
    log_attempt("acquired", run)
    if job.rerun_abandoned and trigger != "manual":  # under the lock, before the watchdog
        attempt.reruns = _close_abandoned(ledger, job, run)
        attempt.rerun = lambda again: begin(
            job, database, ledger_database, instance=instance, slot=again, trigger="rerun",
            sessions=sessions, stop=stop,
        )  # fmt: skip
    attempt.start_watchdog()
    faultpoints.reach(faultpoints.AFTER_ACQUIRE)
    if stop is not None and stop.is_set():
        attempt.finish("failed", message=f"{stop.reason}: before the job started")
    return attempt


class _Opening:
    """The first exchange of an attempt (server clock, pause, lock, claim, record), made again
    on fresh connections when a kept one turns out dead. (A plain slotted class: a frozen
    dataclass's __init__ cost the run path ~1.5 us an attempt.)"""

    __slots__ = (
        "job", "database", "ledger_database", "instance", "slot", "trigger", "actor", "claims",
        "stop",
    )  # fmt: skip

    def __init__(
        self,
        job: Job,
        database: Database,
        ledger_database: Database,
        instance: str,
        slot: datetime | None,
        trigger: Trigger,
        actor: str | None,
        claims: bool,
        stop: Stop | None,
    ) -> None:
        self.job, self.database, self.ledger_database = job, database, ledger_database
        self.instance, self.slot, self.trigger, self.actor = instance, slot, trigger, actor
        self.claims, self.stop = claims, stop

    def decide(self, lock: Lock, ledger: Ledger) -> tuple[Run, Merged | None]:
        """The recorded Run (skipped, paused or acquired) and the merged statements used."""
        job, database, ledger_database = self.job, self.database, self.ledger_database
        # started_at is the ledger server's time, once connected (connecting may take seconds)
        same_server = database.shares_connection(ledger_database)  # a lease: read on its connection
        ask = getattr(lock, "server_time", None) if same_server else None
        reading = server_clock.reading(ledger, ask)
        started = reading.now()
        slot = manual_slot(started) if self.slot is None else self.slot  # a manual run's: its start
        # built on every field's default (Run(...) of a frozen dataclass cost ~2 us more)
        base: Run = construct(
            Run,
            {
                **_RUN_DEFAULTS,
                "job": job.name,
                "slot": slot,
                "instance": self.instance,
                "host": _HOST,
                "pid": os.getpid(),
                "trigger": self.trigger,
                "outcome": "skipped",
                "started_at": started,
                "strategy": job.strategy,
                "lock_key": str(job.key),
                "actor": self.actor,
                "clock_offset_ms": round(reading.offset * 1000),
            },
        )
        merged = merged_for(lock, database, ledger_database)
        if merged is None:  # else decide_run reads the pause
            pause = pause_of(ledger, job.name, started)
            if pause is not None:
                return _record_skip(ledger, base, pause.reason(), "paused"), None
        faultpoints.reach(faultpoints.BEFORE_TRY_LOCK)
        if self.stop is not None:
            self.stop.enter_holding()
        return _bounded_decide(job, lock, ledger, base, merged, self.claims)


def _bounded_decide(
    job: Job, lock: Lock, ledger: Ledger, base: Run, merged: Merged | None, claims: bool
) -> tuple[Run, Merged | None]:
    """_decide on the calling thread, cut loose at DECIDE_SECONDS (engine/closing.py): a peer
    that never answers makes it raise DatabaseError, once our stuck server session (which may
    have got the lock) was ended from a fresh connection, so a retry can take the lock."""
    overdue: list[bool] = []  # a flag set by the cut (cheaper than an Event per attempt)

    def cut() -> None:
        overdue.append(True)
        abandon = getattr(lock, "abandon", None)
        if abandon is not None:
            abandon()

    token = DEADLINES.arm(DECIDE_SECONDS, cut)
    try:
        return _decide(job, lock, ledger, base, merged, claims=claims)
    except Exception as exc:
        if not overdue:
            raise
        cut_loose(lock, job.name)
        raise DatabaseError(f"no answer within {DECIDE_SECONDS:.0f} s: {exc}") from None
    finally:
        DEADLINES.disarm(token)


def _decide(
    job: Job, lock: Lock, ledger: Ledger, base: Run, merged: Merged | None, *, claims: bool
) -> tuple[Run, Merged | None]:
    """Try the lock, check the slot's claim under it, record the attempt: the recorded Run.

    Where the merged statements apply (backends/merged.py) this is one round trip, the job's
    pause read in it; whatever they leave undecided goes on here one statement at a time, from
    where they left the lock (held or not), asking for the pause first. `merged`: merged_for
    this lock (asked once per lock by the caller).
    """
    if merged is not None:
        decided = merged.decide(ledger, base, claims=claims)
        if decided is not None:
            return decided, merged
        pause = pause_of(ledger, job.name, base.started_at)
        if pause is not None:
            if lock.held:
                lock.release()
            return _record_skip(ledger, base, pause.reason(), "paused"), merged
    if not (lock.held or lock.acquire()):
        return _record_skip(ledger, base, SKIP_HELD), merged
    if claims:
        claim = _slot_claim(ledger, job, base.slot, base.instance, base.started_at)
        if claim is not None:
            lock.release()
            reason = f"slot already ran on {claim.instance} (run {claim.id}, {claim.outcome})"
            return _record_skip(ledger, base, reason), merged
    fence(lock, ledger)
    acquired = evolve(
        base, outcome="acquired", session_id=lock.session_id, fencing_token=lock.fencing_token
    )
    return ledger.record(acquired), merged


def _open(job: Job, database: Database, instance: str) -> Lock:
    name = application_name(job, instance)
    return open_lock(job, database, instance=instance, application_name=name)


def _slot_claim(
    ledger: Ledger, job: Job, slot: datetime, instance: str, started: datetime | None = None
) -> Run | None:
    """The slot's claim, once attempts still marked "acquired" are closed as abandoned.

    We hold the lock now, so an earlier attempt of this slot that is still "acquired" no
    longer does: its process was killed, or its session or lease ended, before it could
    record an outcome. It is closed as lock_lost, ending at `started` (the lock was free by the
    time we took it; a holder still running adds its real end when its own write finds the
    row closed), and the slot may run again (the idempotency key keeps its effects single).
    """
    claim = ledger.slot_claim(job.name, slot)
    for _ in range(100):
        if claim is None or claim.outcome != "acquired":
            break
        note = f"abandoned: the lock was free when {instance} took it (holder died or expired)"
        try:
            closed = ledger.finish(claim, "lock_lost", message=note, finished_at=started)
            log_attempt("lock_lost", closed)
        except RunClosedError:
            pass  # closed meanwhile by its own process or by a check
        claim = ledger.slot_claim(job.name, slot)
    return claim


def _close_abandoned(ledger: Ledger, job: Job, run: Run) -> list[datetime]:
    """Earlier slots of `job` left "acquired" (we hold the job's lock, so their runners are
    gone): each closed as lock_lost, ending when we took the lock; the slots to run again."""
    slots = []
    for claim in ledger.abandoned(job.name, run):
        note = f"abandoned: the lock was free when {run.instance} took it; rerun_abandoned reruns"
        try:
            log_attempt(
                "lock_lost",
                ledger.finish(claim, "lock_lost", message=note, finished_at=run.started_at),
            )
        except RunClosedError:
            continue  # closed meanwhile by its own process, or by the console's sweep
        slots.append(claim.slot)
    return sorted(set(slots))


def _share_connection(
    job: Job, lock: Lock, ledger: Ledger, database: Database, ledger_database: Database
) -> None:
    """One attempt per process: let the ledger write on the lock's connection, saving a connect.

    Only for pg-session and mysql locks on the ledger's own database: their connection is
    autocommit, so each ledger row commits at once (a skip is visible to everyone before the
    connection closes). The writes happen before the watchdog starts and after it stopped,
    never beside it. pg-xact never lends its connection: its writes would sit in the lock's
    transaction until COMMIT.
    """
    if job.strategy in ("pg-session", "mysql") and database.shares_connection(ledger_database):
        ledger.borrow(lock.conn)  # type: ignore[attr-defined]


def _record_skip(ledger: Ledger, base: Run, reason: str, outcome: Outcome = "skipped") -> Run:
    return ledger.record(evolve(base, outcome=outcome, finished_at=ledger.now(), message=reason))


def _close_quietly(lock: Lock) -> None:
    try:
        lock.release()
    except Exception:
        pass
    try:
        lock.close()
    except Exception:
        pass
