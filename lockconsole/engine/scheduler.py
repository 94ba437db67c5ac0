"""`lockconsole schedule`: fire every job at its cron times through the runner, on one instance.

Run it on every instance instead of an unguarded in-app scheduler: each firing is one attempt
per instance, the lock lets one through, and the ledger records them all.

stop() (SIGTERM, SIGINT) reaches every attempt at whatever step it is: one still connecting or
trying the lock gives up, one holding the lock records a failure and never starts its job, a
running job gets SIGTERM then SIGKILL after stop_grace. run_forever() returns within the
longest stop_grace + EXIT_SLACK seconds of the stop, whatever the attempts were doing.

With `[ledger] retention` set, a thread of its own prunes the ledgers of these jobs
`PRUNE_FIRST` seconds after the start and then every `PRUNE_EVERY` seconds, off the firings'
path: audited, in short batches, stopped between two batches by stop(). Across a fleet one
prune of a ledger runs at a time (the prune's own lock); the others find nothing left to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from lockconsole.backends.threads import start_quiet
from lockconsole.config.loader import Config
from lockconsole.engine.stopping import Stop, Stopped
from lockconsole.model.jobs import Job
from lockconsole.model.slots import next_fire, utcnow

if TYPE_CHECKING:
    pass

log = logging.getLogger(__name__)
EXIT_SLACK = 1.5  # seconds after the longest stop_grace for attempts to record and release
PRUNE_FIRST = 600.0  # seconds after the start: the first daily prune (not while starting up)
PRUNE_EVERY = 86400.0  # seconds between two daily prunes


class Scheduler:
    """A cron loop over a set of jobs; stop() (or SIGTERM) ends it cleanly."""

    def __init__(
        self,
        config: Config,
        jobs: Sequence[Job],
        *,
        instance: str,
        clock: Callable[[], datetime] = utcnow,
        prune_first: float = PRUNE_FIRST,
        prune_every: float = PRUNE_EVERY,
    ) -> None:
        self.config = config
        self.prune_first, self.prune_every = prune_first, prune_every
        self.jobs = [j for j in jobs if j.schedule]
        self.instance = instance
        self.clock = clock
        self.stopping = threading.Event()
        self.stop_reason = "scheduler stopping"
        self._stopped_at: float | None = None
        self._threads: list[threading.Thread] = []
        self._stops: dict[threading.Thread, Stop] = {}  # the attempts in flight
        self._lock = threading.RLock()  # re-entrant: stop() may run in a signal handler
        self._wake: tuple[int, int] | None = None  # wakes the main loop at once on a stop
        from lockconsole.engine.sessions import SessionRegistry

        self.sessions = SessionRegistry()  # lock + ledger connections kept between firings

    def stop(self, reason: str = "scheduler stopping", signum: int | None = None) -> None:
        """Stop firing, and stop every attempt in flight at whatever step it is."""
        with self._lock:
            if not self.stopping.is_set():
                self.stop_reason, self._stopped_at = reason, time.monotonic()
            self.stopping.set()
            stops = list(self._stops.values())
            if self._wake is not None:  # under the lock: run_forever closes it under it too
                try:
                    os.write(self._wake[1], b"s")
                except BlockingIOError:  # full: the loop is woken already
                    pass
        for stop in stops:
            stop.request(reason, signum)

    def run_forever(self, duration: float | None = None) -> int:
        """Fire jobs until stop(), SIGTERM/SIGINT, or `duration` seconds; then wait for runs.

        stop() and the signals stop running jobs too; the end of `duration` lets them finish.
        """
        self._wake = os.pipe()
        for fd in self._wake:
            os.set_blocking(fd, False)
        previous_wakeup = None
        try:
            with self.signals_stop_it():
                if threading.current_thread() is threading.main_thread():
                    # a signal delivered to a job thread wakes the main loop through this pipe
                    previous_wakeup = signal.set_wakeup_fd(self._wake[1])
                return self._loop(duration)
        finally:
            if previous_wakeup is not None:
                signal.set_wakeup_fd(previous_wakeup)
            with self._lock:
                wake, self._wake = self._wake, None
            for fd in wake or ():
                os.close(fd)

    @contextlib.contextmanager
    def signals_stop_it(self) -> Iterator[None]:
        """While inside, SIGTERM and SIGINT stop this scheduler (in the main thread; elsewhere
        signals are not ours to take); the handlers before are put back on the way out.
        `schedule` enters it before it starts the request server and the journal sampler, so
        a stop while they connect stops it too: it then fires nothing."""
        previous = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, self._on_signal)
        try:
            yield
        finally:
            for sig, handler in previous.items():  # the app's own handlers again
                signal.signal(sig, handler)

    def _loop(self, duration: float | None) -> int:
        if not self.jobs:
            log.warning("no job with a schedule to fire")
        import_run_path(self.config, self.jobs)
        pruner = None
        if self.config.retention is not None and self.jobs:
            pruner = threading.Thread(
                target=self._prune_daily, daemon=True, name="lockconsole-prune"
            )
            start_quiet(pruner)
        started = self.clock()
        due = {job.name: next_fire(job, started) for job in self.jobs}
        log.info("scheduler started instance=%s jobs=%s", self.instance, ",".join(due))
        while not self.stopping.is_set():
            now = self.clock()
            if duration is not None and (now - started).total_seconds() >= duration:
                break
            for job in self.jobs:
                fire = due[job.name]
                if fire is not None and fire <= now:
                    self._fire(job, fire)
                    due[job.name] = next_fire(job, max(now, fire))
            upcoming = [t for t in due.values() if t is not None]
            wait = min((t - self.clock()).total_seconds() for t in upcoming) if upcoming else 1.0
            if duration is not None:
                wait = min(wait, duration - (self.clock() - started).total_seconds())
            self._nap(max(0.01, min(wait, 1.0)))
        # After --for, runs in flight finish; after stop() or a signal they were told to stop.
        self._wait_for_runs()
        if pruner is not None:  # stopped between two batches; a batch is short
            pruner.join(EXIT_SLACK)
        self.sessions.close_all()
        log.info("scheduler stopped instance=%s", self.instance)
        return 0

    def _prune_daily(self) -> None:
        """Prune the ledgers of these jobs now and then (see the module's docstring)."""
        from lockconsole.backends.ledger.retention.fleet import Actor, audited_prune

        retention = self.config.retention
        assert retention is not None
        ledgers = {
            self.config.ledger_for(job).name: self.config.ledger_for(job) for job in self.jobs
        }
        actor = Actor("schedule", self.instance)
        wait = self.prune_first
        while not self.stopping.wait(wait):
            wait = self.prune_every
            for name, database in sorted(ledgers.items()):
                try:
                    report = audited_prune(database, actor, retention, stop=self.stopping.is_set)
                except Exception as exc:  # the next day tries again; the firings go on
                    log.error("daily prune of ledger %s: %s", name, exc)
                    continue
                log.info("daily prune of ledger %s: %s", name, report.line())

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stop(f"stopped by {signal.Signals(signum).name}", signum)

    def _wait_for_runs(self) -> None:
        """Join the attempts; once stopped, for at most the longest stop_grace + EXIT_SLACK.

        Once stopped, an attempt that had not reached the lock never will (Stop.enter_holding)
        and holds nothing: it is not waited for (it may still be connecting). One still busy
        after the bound (a database that does not answer) is left to the process exit: its
        connections close, and its job's supervisor stops the job.
        """
        grace = max((job.stop_grace for job in self.jobs), default=0.0) + EXIT_SLACK
        while True:
            with self._lock:
                stops = dict(self._stops)
            alive = [t for t in self._threads if t.is_alive()]
            if self._stopped_at is not None:
                alive = [t for t in alive if t not in stops or stops[t].holding]
            if not alive:
                return
            if self._stopped_at is not None:
                left = self._stopped_at + grace - time.monotonic()
                if left <= 0:
                    log.warning(
                        "exiting with %d attempt(s) unfinished %.1f s after the stop",
                        len(alive),
                        grace,
                    )
                    return
                self._nap(min(left, 0.05))
            else:
                self._nap(0.05)

    def _nap(self, seconds: float) -> None:
        """Sleep up to `seconds`; a stop or a signal (on any thread) ends it at once."""
        assert self._wake is not None
        if select.select([self._wake[0]], [], [], seconds)[0]:
            try:
                os.read(self._wake[0], 512)
            except BlockingIOError:
                pass

    def _fire(self, job: Job, slot: datetime) -> None:
        thread = threading.Thread(
            target=self._attempt, args=(job, slot), daemon=True, name=f"lockconsole-job-{job.name}"
        )
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        start_quiet(thread)

    def _attempt(self, job: Job, slot: datetime) -> None:
        from lockconsole.engine.execute import run_target, target_of
        from lockconsole.engine.runner import begin

        stop = Stop()
        with self._lock:  # registered before the flag is read: stop() cannot miss it
            self._stops[threading.current_thread()] = stop
            if self.stopping.is_set():
                stop.request(self.stop_reason)
        try:
            target = target_of(job)
            if target is None:
                log.error("job %s has no command or callable; not fired", job.name)
                return
            attempt = begin(
                job,
                self.config.database_for(job),
                self.config.ledger_for(job),
                instance=self.instance,
                slot=slot,
                sessions=self.sessions,
                stop=stop,
            )
            run_target(attempt, target, handle_signals=False)
        except Stopped as exc:
            log.info(
                "job %s slot %s: %s before the lock was tried", job.name, slot.isoformat(), exc
            )
        except Exception as exc:  # one job's trouble must not stop the others
            log.error("job %s slot %s: %s", job.name, slot.isoformat(), exc)
        finally:
            with self._lock:
                self._stops.pop(threading.current_thread(), None)


_BACKENDS = {
    "pg-session": "postgres",
    "pg-xact": "postgres",
    "mysql": "mysql",
    "lease": "lease",
    "redis": "redis",
}


def import_run_path(config: Config, jobs: Sequence[Job]) -> None:
    """Import what an attempt needs now, so the first firing does not spend its time importing.

    Called in the main thread before any thread of ours starts (the request server's, the job
    threads): SQLAlchemy, which leases and a SQLite ledger load, imports its modules in cycles,
    and two threads importing it at the same time can fail with "deadlock detected by
    _ModuleLock". A SQLite ledger's SQLAlchemy is imported here too.
    """
    import importlib

    importlib.import_module("lockconsole.engine.execute")
    for name in {_BACKENDS[job.strategy] for job in jobs if job.strategy in _BACKENDS}:
        importlib.import_module(f"lockconsole.backends.{name}.lock")
    if any(config.ledger_for(job).url.dialect == "sqlite" for job in jobs):
        importlib.import_module("sqlalchemy")
        importlib.import_module("sqlalchemy.dialects.sqlite")
    if config.retention is not None and jobs:  # the daily prune's thread creates tables, audits
        importlib.import_module("lockconsole.backends.ledger.retention.fleet")
        importlib.import_module("lockconsole.backends.sa")
        drivers = {"postgresql": "psycopg", "mysql": "pymysql", "sqlite": "pysqlite"}
        for dialect in {config.ledger_for(job).url.dialect for job in jobs}:
            importlib.import_module(f"sqlalchemy.dialects.{dialect}.{drivers[dialect]}")
        importlib.import_module("lockconsole.backends.ledger.schema").schema()
