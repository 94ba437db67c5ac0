"""One attempt in progress: its ledger row, the lock's watchdog, a stop request, and its close.

Every attempt on every instance becomes one ledger row and one log line
("acquired" / "skipped" / "succeeded" / "failed" / "lock_lost").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lockconsole.backends import Lock
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.store import finished as finished_run
from lockconsole.backends.merged import LOST, Finished, Merged
from lockconsole.engine import faultpoints
from lockconsole.engine.closing import (
    DEADLINES,
    LEDGER_RETRY_SECONDS,
    Overdue,
    cut_loose,
    end_stuck_session,
    lock_still_held,
    within,
)
from lockconsole.engine.outcome import closed_by_other, keep_run_output, record_outcome
from lockconsole.engine.sessions import SessionRegistry, give_back
from lockconsole.engine.stopping import Stop
from lockconsole.engine.watchdog import WATCHDOGS, Watch
from lockconsole.model.context import JobContext, qualified_run_id
from lockconsole.model.errors import LockLostError, RunClosedError
from lockconsole.model.jobs import Job, Run, evolve

log = logging.getLogger(__name__)
_EVENTS = threading.Lock()  # makes an Attempt's events on first use, once


def log_attempt(event: str, run: Run, **extra: object) -> None:
    """One structured (logfmt) line per attempt: event, job, slot, instance, host, pid, run id."""
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
    known = {k: v for k, v in fields.items() if v is not None}
    line = " ".join(f"{k}={_logfmt(v)}" for k, v in known.items())
    log.log(level, "%s", line, extra={"fields": known})  # kept whole for --log-format json


def _logfmt(value: object) -> str:
    text = str(value)
    if not text or any(c in text for c in ' "='):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


STOPPING_FINISH = 1.5  # seconds the finish may still take once a stop was asked for
CONNECT_SECONDS = 10.0  # a reconnect of the outcome write (the drivers' connect timeout)
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
    _stuck: bool = False  # a check got no answer: our server session may outlive our end of it
    _acquired_mono: float | None = None  # time.monotonic() at the acquisition (min_hold)
    sessions: SessionRegistry | None = None  # where the lock and ledger go back after finish
    session_key: tuple[Any, ...] = ()
    merged: Merged | None = None  # check, record and release in one statement (PostgreSQL)
    output: str | None = None  # the job's output tail (or traceback), kept with the outcome
    output_cut: int = 0  # bytes of the job's output cut off before `output` begins
    reruns: list[datetime] = field(default_factory=list)  # abandoned slots to run again after
    rerun: Callable[[datetime], Attempt] | None = None  # begins one of them (rerun_abandoned)
    _merged_tried: bool = False  # the merged finish ran on the caller's thread, left the rest
    _finished: Finished | None = None  # what it did, when that is taken in on the worker

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

    @property
    def context(self) -> JobContext:
        """What the job may know of this attempt: slot, qualified run id, fencing token."""
        run = self.run
        return JobContext(
            job=run.job,
            slot=run.slot,
            run_id=qualified_run_id(self.ledger.database.name, run.id),
            instance=run.instance,
            trigger=run.trigger,
            fencing_token=run.fencing_token,
        )

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
        if (
            self.job.min_hold
        ):  # only _hold_min reads it: an interval, on this host's monotonic clock
            self._acquired_mono = time.monotonic()
        socket_fd = getattr(self.lock, "socket_fd", None)
        fd = socket_fd() if socket_fd is not None else None
        if socket_fd is not None and fd is None:  # its session ended since the try-lock
            self.lost.set()  # the lock is gone: the attempt ends here, the job never starts
            self.finish("lock_lost", message="the lock's session ended before the job started")
            return
        self._watch = WATCHDOGS.watch(
            self.job.watchdog_interval, check=self._checked, on_lost=self._lock_gone, fd=fd
        )

    def _checked(self) -> bool:
        """The watchdog's check of the lock, under the job's client-side deadline: a check
        that gets no answer in time (a peer that swallows the bytes) counts as a lost lock."""
        lock = self.lock
        if lock is None:
            return False
        try:
            return within(self.job.check_timeout, lock.still_held, "the lock check")
        except Overdue as exc:  # cut our end now; the server's session once the job is told
            log.warning("job %s: %s: counted as a lost lock", self.job.name, exc)
            self._stuck = True
            getattr(lock, "abandon", lambda: None)()
            return False

    def _cut_loose(self) -> None:
        """The lock's connection stopped answering: see cut_loose."""
        if self.lock is not None:
            cut_loose(self.lock, self.job.name)

    def _lock_gone(self, *, callbacks: bool = True) -> None:
        """The watchdog found the lock gone: flag it, log it, tell the job's callbacks."""
        self.lost.set()
        log_attempt("lock_lost", self.run, message="lock or its connection went away")
        faultpoints.reach(faultpoints.LOCK_LOST)  # flagged: the job's next check() raises
        for callback in self.on_lock_lost if callbacks else ():
            try:
                callback(self)
            except Exception:  # the job's callback must not stop the release
                log.exception("on_lock_lost callback failed")
        if self._stuck and self.lock is not None:  # the job is told first: this may take seconds
            end_stuck_session(self.lock, self.job.name)

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
        self._hold_min(outcome)
        # every step below talks to a database: bounded, so a peer that never answers cannot
        # hold the runner after its job; once a stop is asked for, it has STOPPING_FINISH left
        if "sqlite" in (self.ledger.dialect, self.lock.database.url.dialect):
            # a file, no peer to hang on, and its connections belong to the thread that made them
            return self._close_out(outcome, exit_code, message)
        merged = self._merged_finish(outcome, exit_code, message)
        if merged is not None:
            return merged
        try:
            return within(
                self._finish_budget(),
                lambda: self._close_out(outcome, exit_code, message),
                "recording the outcome",
                stop=self.stop,
                stop_seconds=STOPPING_FINISH,
            )
        except Overdue as exc:
            return self._unanswered(str(exc), exit_code)

    def _unanswered(self, what: str, exit_code: int | None, *, give_back_lock: bool = False) -> Run:
        """The finish got no answer in time: the lock counts as lost, its connections are cut
        loose, and the ledger's row is left for the next attempt to close."""
        log.warning("job %s: %s: the lock counts as lost", self.job.name, what)
        self.lost.set()
        self._cut_loose()
        self.run = evolve(
            self.run,
            outcome="lock_lost",
            exit_code=exit_code,
            message=f"{what}; the ledger's row is closed by the next attempt (its end unknown)",
        )
        if give_back_lock and self.lock is not None:
            give_back(self.sessions, self.session_key, self.lock, self.ledger, keep=False)
        log_attempt(self.run.outcome, self.run)
        return self.run

    def _merged_finish(
        self, outcome: str, exit_code: int | None, message: str | None
    ) -> Run | None:
        """The usual finish, on this thread: the merged statement checks, records and releases
        on the lock's own connection (handing it to a worker thread cost two thread switches
        an attempt). It has the deadline the worker's call has (STOPPING_FINISH once a stop was
        asked for; a stop asked while the statement runs does not shorten it): past it the
        statement's socket is cut, the call returns with an error, and the attempt ends as a
        finish that got no answer does. None when it does not apply (no merged statement, a
        lock without a socket to cut, output to keep) or left more to do: the rest then goes on
        a worker thread under its deadline, one statement at a time."""
        lock, merged = self.lock, self.merged
        if merged is None or self.output or self._was_lost() or not hasattr(lock, "socket_fd"):
            return None
        abandon = getattr(lock, "abandon", None)
        if lock is None or abandon is None:
            return None
        overdue: list[bool] = []  # a flag set by the cut (cheaper than an Event per attempt)

        def cut() -> None:
            overdue.append(True)
            abandon()

        stopping = self.stopping is not None and self.stopping.is_set()
        seconds = STOPPING_FINISH if stopping else self._finish_budget()
        faultpoints.reach("finish_before_check")  # the job ended; the lock is not checked yet
        self._merged_tried = True
        token = DEADLINES.arm(seconds, cut)
        try:
            faultpoints.reach("finish_before_record")  # one statement checks and records
            finished = merged.finish(
                self.ledger, self.run, outcome, exit_code=exit_code, message=message
            )
        except Exception as exc:  # as a failed merged statement: one statement at a time
            log.debug("the merged finish failed: %s", exc)
            finished = None
        finally:
            DEADLINES.disarm(token)
        if overdue:
            what = f"recording the outcome: no answer within {seconds:.1f} s"
            return self._unanswered(what, exit_code, give_back_lock=True)
        if finished is None:
            return None
        if not (finished.held and finished.released and finished.outcome is not None):
            self._finished = finished  # taken in on the worker: it may write again
            return None
        self._take_in(finished, outcome, exit_code, message)
        self._release(True)
        log_attempt(self.run.outcome, self.run)
        return self.run

    def _finish_budget(self) -> float:
        """How long the finish's database steps may take in all."""
        return self.job.check_timeout + LEDGER_RETRY_SECONDS + CONNECT_SECONDS

    def _close_out(self, outcome: str, exit_code: int | None, message: str | None) -> Run:
        """Confirm the lock, record the outcome, release: the finish's database steps."""
        assert self.lock is not None
        clean = False
        try:
            if not self._merged_tried:
                faultpoints.reach("finish_before_check")  # the job ended, the lock not checked
            finished = self._finished
            if self.merged is not None and not self._was_lost() and not self._merged_tried:
                faultpoints.reach("finish_before_record")  # one statement checks and records
                finished = self.merged.finish(
                    self.ledger, self.run, outcome, exit_code=exit_code, message=message
                )
            if finished is not None:
                clean = self._take_in(finished, outcome, exit_code, message)
            else:
                if not self._was_lost() and not lock_still_held(self.lock):
                    self._lock_gone(callbacks=False)
                if self._was_lost():
                    outcome, message = "lock_lost", message or LOST
                faultpoints.reach("finish_before_record")  # checked, the outcome not yet written
                try:
                    self.run = record_outcome(
                        self.ledger,
                        self.job,
                        self.run,
                        self.lock,
                        outcome,
                        exit_code,
                        message,
                        lost=self._was_lost(),
                    )
                except RunClosedError:  # closed as abandoned by an instance that took the lock
                    self.lost.set()
                    self.run = closed_by_other(self.ledger, self.run, exit_code)
                clean = self.run.outcome != "lock_lost"
            keep_run_output(self.ledger, self.run, self.output, self.output_cut)
        finally:
            self._release(clean)
        log_attempt(self.run.outcome, self.run)
        return self.run

    def _take_in(
        self, finished: Finished, outcome: str, exit_code: int | None, message: str | None
    ) -> bool:
        """What the one-statement finish did, taken in; True if the attempt ended cleanly."""
        if not finished.held:
            self._lock_gone(callbacks=False)
            outcome, message = "lock_lost", message or LOST
        if finished.outcome is None:  # closed meanwhile by an instance that took the lock
            self.lost.set()
            self.run = closed_by_other(self.ledger, self.run, exit_code)
            return False
        params = self.ledger.finish_params_again(
            self.run, outcome, exit_code=exit_code, message=message
        )
        self.run = finished_run(self.run, params, finished.outcome)
        return finished.held and finished.released

    def _release(self, clean: bool) -> None:
        """Release the lock unless the finish did, then give the connections back or close them."""
        lock = self.lock
        assert lock is not None
        try:
            if lock.release() is False and clean:
                log.warning(
                    "the lock of %s was gone at release (after the outcome was written)",
                    self.job.name,
                )
        except Exception as exc:
            clean = False
            log.warning("releasing the lock of %s failed: %s", self.job.name, exc)
        finally:
            give_back(self.sessions, self.session_key, lock, self.ledger, keep=clean)

    def _hold_min(self, outcome: str) -> None:
        """Keep an advisory lock for min_hold (leases and Redis keys keep it themselves)."""
        if not self.job.min_hold or self.job.strategy in _SELF_HOLDING or outcome == "lock_lost":
            return
        if self._acquired_mono is None:
            return
        held = time.monotonic() - self._acquired_mono
        remaining = self.job.min_hold.total_seconds() - held
        if remaining > 0:
            self.stop.wait(remaining)
