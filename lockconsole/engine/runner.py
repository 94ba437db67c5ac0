"""Run under a lock: acquire, record, watch, run, release, record.

Every attempt on every instance becomes one ledger row and one log line
("acquired" / "skipped" / "succeeded" / "failed" / "lock_lost").
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lockconsole.backends import Lock, open_lock
from lockconsole.backends.ledger.store import Ledger
from lockconsole.engine import faultpoints
from lockconsole.engine.closing import _borrow_lock_connection, _held, _retrying
from lockconsole.engine.sessions import Session, SessionRegistry, session_key
from lockconsole.engine.stopping import Stop
from lockconsole.engine.watchdog import WATCHDOGS, Watch
from lockconsole.model.errors import DatabaseError, LockLostError, RunClosedError
from lockconsole.model.jobs import Database, Job, Run, Trigger, evolve
from lockconsole.model.slots import manual_slot, slot_for, utcnow

log = logging.getLogger("lockconsole.engine.runner")

EXIT_SUCCEEDED = 0
EXIT_FAILED = 1  # the job failed; its own non-zero exit code is passed through unless reserved
EXIT_USAGE = 2
EXIT_SKIPPED = 3
EXIT_LOCK_LOST = 4
EXIT_DATABASE = 5
RESERVED_EXIT_CODES = frozenset({EXIT_USAGE, EXIT_SKIPPED, EXIT_LOCK_LOST, EXIT_DATABASE})
SKIP_HELD = "lock held by another session"
_HOST = socket.gethostname()
_EVENTS = threading.Lock()  # makes an Attempt's events on first use, once


def default_instance(configured: str | None = None) -> str:
    """--instance, else $LOCKCONSOLE_INSTANCE, else the config's, else the host name."""
    return os.environ.get("LOCKCONSOLE_INSTANCE") or configured or socket.gethostname()


def application_name(job: Job, instance: str) -> str:
    """What pg_stat_activity shows for our lock sessions (PostgreSQL keeps 63 bytes)."""
    return f"lockconsole:{job.name}@{instance}"[:63]


def exit_code_for(run: Run) -> int:
    """The documented exit code of `lockconsole run` for a finished attempt."""
    if run.outcome == "skipped":
        return EXIT_SKIPPED
    if run.outcome == "lock_lost":
        return EXIT_LOCK_LOST
    if run.outcome == "succeeded":
        return EXIT_SUCCEEDED
    code = run.exit_code or EXIT_FAILED
    return EXIT_FAILED if code in RESERVED_EXIT_CODES else code


def log_attempt(event: str, run: Run, **extra: object) -> None:
    """One structured (logfmt) line per attempt, as the seed advises."""
    level = logging.WARNING if event in ("lock_lost", "failed") else logging.INFO
    if not log.isEnabledFor(level):
        return
    fields: dict[str, object] = {
        "event": event,
        "job": run.job,
        "slot": run.slot.isoformat(),
        "instance": run.instance,
        "host": run.host,
        "pid": run.pid,
        "trigger": run.trigger,
        "strategy": run.strategy,
        "key": run.lock_key,
        "run_id": run.id,
    }
    if run.fencing_token is not None:
        fields["token"] = run.fencing_token
    if run.exit_code is not None:
        fields["exit_code"] = run.exit_code
    if run.message:
        fields["message"] = run.message
    fields.update(extra)
    line = " ".join(f"{k}={_logfmt(v)}" for k, v in fields.items() if v is not None)
    log.log(level, "%s", line)


def _logfmt(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


# their store keeps min_hold; a lock can expire there after the watchdog's last look: finish checks
_SELF_HOLDING = ("lease", "redis")


@dataclass
class Attempt:
    """One attempt in progress: its ledger row, and while acquired, the lock and its watchdog."""

    job: Job
    run: Run
    lock: Lock | None
    ledger: Ledger
    _lost: threading.Event | None = None  # made on first use (most attempts never need it)
    stopping: Stop | None = None  # the attempt's sticky stop request (made on first use)
    on_lock_lost: list[Callable[[Attempt], None]] = field(default_factory=list)
    on_stop: list[Callable[[str], None]] = field(default_factory=list)
    _watch: Watch | None = None
    _acquired_at: datetime | None = None
    sessions: SessionRegistry | None = None  # where the lock and ledger go back after finish
    session_key: tuple[Any, ...] = ()

    @property
    def lost(self) -> threading.Event:
        """Set when the watchdog finds the lock gone: wait on it, or pass it as a stop flag."""
        return self._event("_lost")

    @property
    def stop(self) -> threading.Event:
        """Set when the job is asked to stop (request_stop)."""
        return self.stop_request().event

    def stop_request(self) -> Stop:
        """The sticky stop request: `on_request(callback)` runs now if it was already made."""
        if self.stopping is None:
            with _EVENTS:
                if self.stopping is None:
                    self.stopping = Stop()
        return self.stopping

    def _event(self, attr: str) -> threading.Event:
        """The event kept in `attr`, made on first use (once, whichever thread asks first)."""
        event = getattr(self, attr)
        if event is None:
            with _EVENTS:
                event = getattr(self, attr)
                if event is None:
                    event = threading.Event()
                    setattr(self, attr, event)
        return event

    def _was_lost(self) -> bool:
        return self._lost is not None and self._lost.is_set()

    @property
    def acquired(self) -> bool:
        return self.lock is not None and self.run.outcome == "acquired"

    def check(self) -> None:
        """Raise LockLostError if the watchdog found the lock gone (for cooperative jobs)."""
        if self.lost.is_set():
            raise LockLostError(f"lock of job {self.job.name} was lost while the job ran")

    def request_stop(self, reason: str, signum: int | None = None) -> None:
        """Ask the job to stop, at any instant: one not started yet never starts; a command
        that runs gets SIGTERM, then SIGKILL after stop_grace. The request sticks."""
        self.stop_request().request(reason, signum)
        for callback in self.on_stop:
            callback(reason)

    def start_watchdog(self) -> None:
        assert self.lock is not None
        self._acquired_at = utcnow()
        socket_fd = getattr(self.lock, "socket_fd", None)
        fd = socket_fd() if socket_fd is not None else None
        if socket_fd is not None and fd is None:  # its session ended since the try-lock
            self.lost.set()  # the lock is gone: the attempt ends here, the job never starts
            self.finish("lock_lost", message="the lock's session ended before the job started")
            return
        self._watch = WATCHDOGS.watch(
            self.job.watchdog_interval, check=self.lock.still_held, on_lost=self._lock_gone, fd=fd
        )

    def _lock_gone(self, *, callbacks: bool = True) -> None:
        """The watchdog found the lock gone: flag it, log it, tell the job's callbacks."""
        self.lost.set()
        log_attempt("lock_lost", self.run, message="lock or its connection went away")
        for callback in self.on_lock_lost if callbacks else ():
            try:
                callback(self)
            except Exception:  # the job's callback must not stop the release
                log.exception("on_lock_lost callback failed")

    def finish(
        self, outcome: str, *, exit_code: int | None = None, message: str | None = None
    ) -> Run:
        """Stop the watchdog, honour min_hold, confirm the lock, record the outcome, release.

        The order makes the outcome true and never leaves a finished attempt "acquired":
        1. the watchdog stops, min_hold is honoured;
        2. the lock is checked once more on its own connection. The job has ended, and a lost
           session lock is never regained by its session (a lease taken over gets a new token),
           so a lock still ours now was ours for the whole run: only then "succeeded";
        3. the outcome is written while the lock is held, only if the row is still "acquired"
           by this instance and process: if an instance that took the lock after a loss closed
           it as abandoned, that close stands and this attempt is lock_lost (adding its real end);
        4. the lock is released: whoever gets it next finds this attempt finished.
        """
        if not self.acquired:
            return self.run
        if self._watch is not None:
            self._watch.stop()  # returns once no check (or its on_lock_lost) is running
        assert self.lock is not None
        clean = False
        try:
            self._hold_min(outcome)
            faultpoints.reach("finish_before_check")  # the job ended; the lock is not checked yet
            if not self._was_lost() and not _held(self.lock):
                self._lock_gone(callbacks=False)
            if self._was_lost():
                outcome, message = "lock_lost", message or "lock or its connection went away"
            faultpoints.reach("finish_before_record")  # checked, the outcome not yet written
            self.run = self._record(outcome, exit_code, message)
            clean = self.run.outcome != "lock_lost"
        finally:
            try:
                if self.lock.release() is False and clean:
                    log.warning("the lock of %s was gone at release (after the outcome was "
                                "written)", self.job.name)  # fmt: skip
            except Exception as exc:
                clean = False
                log.warning("releasing the lock of %s failed: %s", self.job.name, exc)
            finally:
                _give_back(self.sessions, self.session_key, self.lock, self.ledger, keep=clean)
        log_attempt(self.run.outcome, self.run)
        return self.run

    def _record(self, outcome: str, exit_code: int | None, message: str | None) -> Run:
        """Write the outcome (retried while the database is away); lock_lost if it was closed."""

        def write() -> Run:
            return self.ledger.finish(self.run, outcome, exit_code=exit_code, message=message)

        try:
            try:
                return _retrying(write)
            except DatabaseError:
                if not _borrow_lock_connection(self.ledger, self.lock):
                    raise
                log.warning("recording the outcome of %s on the lock's connection", self.job.name)
                return write()
        except RunClosedError:
            self.lost.set()
            end = utcnow()
            try:
                self.ledger.update("extend_lost_run", {
                    "id": self.run.id, "instance": self.run.instance, "pid": self.run.pid,
                    "finished_at": end, "exit_code": exit_code,
                })  # fmt: skip
            except DatabaseError as exc:
                log.warning("could not add the real end of run %s: %s", self.run.id, exc)
            note = "another instance took the lock and closed this attempt as lock_lost"
            return evolve(self.run, outcome="lock_lost", finished_at=end, exit_code=exit_code,
                          message=note)  # fmt: skip

    def _hold_min(self, outcome: str) -> None:
        """Keep an advisory lock for min_hold (leases and Redis keys keep it themselves)."""
        if not self.job.min_hold or self.job.strategy in _SELF_HOLDING or outcome == "lock_lost":
            return
        if self._acquired_at is None:
            return
        remaining = (self._acquired_at + self.job.min_hold - utcnow()).total_seconds()
        if remaining > 0:
            self.stop.wait(remaining)


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
) -> Attempt:
    """Try the lock once and record the attempt; the Attempt says whether to run.

    With `sessions`, the lock and ledger connections come from (and go back to) that registry,
    so repeated attempts in one process connect once; without, they are opened and closed here.
    With `stop`, a stop requested before the lock is tried raises Stopped (nothing is held or
    recorded); one requested once the lock is held records the attempt as failed and releases
    the lock before returning, so the job never starts.
    """
    faultpoints.reach(faultpoints.CONNECTING)
    if stop is not None:
        stop.check()
    started = utcnow()
    if slot is None:
        slot = manual_slot(started) if trigger == "manual" else slot_for(job, started)
    base = Run(
        job=job.name, slot=slot, instance=instance, host=_HOST, pid=os.getpid(),
        trigger=trigger, outcome="skipped", started_at=started, strategy=job.strategy,
        lock_key=str(job.key),
    )  # fmt: skip
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
    try:
        faultpoints.reach(faultpoints.BEFORE_TRY_LOCK)
        if stop is not None:
            stop.enter_holding()
        try:
            got = lock.acquire()
        except DatabaseError:
            if session is None:
                raise
            # a kept connection that died while idle (a server restart, an idle timeout)
            Session(key, lock, ledger).close()
            ledger, lock = Ledger(ledger_database), _open(job, database, instance)
            got = lock.acquire()
        if not got:
            return _skipped(job, ledger, base, SKIP_HELD, lock, sessions, key)
        if job.once_per_slot and trigger == "scheduled":
            claim = _slot_claim(ledger, job, slot, instance, started)
            if claim is not None:
                lock.release()
                reason = f"slot already ran on {claim.instance} (run {claim.id}, {claim.outcome})"
                return _skipped(job, ledger, base, reason, lock, sessions, key)
        run = ledger.record(
            evolve(base, outcome="acquired", session_id=lock.session_id,
                    fencing_token=lock.fencing_token)
        )  # fmt: skip
    except BaseException:
        _close_quietly(lock)
        ledger.close()
        raise
    attempt = Attempt(job, run, lock, ledger, stopping=stop, sessions=sessions, session_key=key)
    log_attempt("acquired", run)
    attempt.start_watchdog()
    faultpoints.reach(faultpoints.AFTER_ACQUIRE)
    if stop is not None and stop.is_set():
        attempt.finish("failed", message=f"{stop.reason}: before the job started")
    return attempt


def _open(job: Job, database: Database, instance: str) -> Lock:
    name = application_name(job, instance)
    return open_lock(job, database, instance=instance, application_name=name)


def _give_back(sessions: SessionRegistry | None, key: tuple[Any, ...], lock: Lock,
               ledger: Ledger, *, keep: bool) -> None:  # fmt: skip
    """Return the connections to `sessions` when `keep` and they are fit, else close them."""
    session = Session(key, lock, ledger)
    if sessions is not None and keep:
        sessions.put(session)
    else:
        session.close()


def _slot_claim(ledger: Ledger, job: Job, slot: datetime, instance: str,
                started: datetime | None = None) -> Run | None:  # fmt: skip
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


def _share_connection(job: Job, lock: Lock, ledger: Ledger, database: Database,
                      ledger_database: Database) -> None:  # fmt: skip
    """One attempt per process: let the ledger write on the lock's connection, saving a connect.

    Only for pg-session and mysql locks on the ledger's own database: their connection is
    autocommit, so each ledger row commits at once (a skip is visible to everyone before the
    connection closes). The writes happen before the watchdog starts and after it stopped,
    never beside it. pg-xact never lends its connection: its writes would sit in the lock's
    transaction until COMMIT.
    """
    if job.strategy in ("pg-session", "mysql") and database.url.raw == ledger_database.url.raw:
        ledger.borrow(lock.conn)  # type: ignore[attr-defined]


def _skipped(job: Job, ledger: Ledger, base: Run, reason: str, lock: Lock,
             sessions: SessionRegistry | None, key: tuple[Any, ...]) -> Attempt:  # fmt: skip
    """Record a skip; the lock (not held) and the ledger go back to `sessions` or are closed."""
    try:
        run = ledger.record(evolve(base, outcome="skipped", finished_at=utcnow(), message=reason))
    except BaseException:
        _give_back(sessions, key, lock, ledger, keep=False)
        raise
    _give_back(sessions, key, lock, ledger, keep=True)
    log_attempt("skipped", run)
    return Attempt(job, run, None, ledger)


def _close_quietly(lock: Lock) -> None:
    try:
        lock.release()
    except Exception:
        pass
    try:
        lock.close()
    except Exception:
        pass
