"""`lockconsole schedule`: fire every job at its cron times through the runner, on one instance.

Run it on every instance instead of an unguarded in-app scheduler: each firing is one attempt
per instance, the lock lets one through, and the ledger records them all.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from .config import Config
from .models import Job
from .slots import next_fire, utcnow

log = logging.getLogger("lockconsole.scheduler")


class Scheduler:
    """A cron loop over a set of jobs; stop() (or SIGTERM) ends it cleanly."""

    def __init__(self, config: Config, jobs: Sequence[Job], *, instance: str,
                 clock: Callable[[], datetime] = utcnow) -> None:  # fmt: skip
        self.config = config
        self.jobs = [j for j in jobs if j.schedule]
        self.instance = instance
        self.clock = clock
        self.stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._attempts: dict[str, object] = {}
        self._lock = threading.Lock()
        from .sessions import SessionRegistry

        self.sessions = SessionRegistry()  # lock + ledger connections kept between firings

    def stop(self, reason: str = "scheduler stopping") -> None:
        self.stopping.set()
        with self._lock:
            attempts = list(self._attempts.values())
        for attempt in attempts:
            attempt.request_stop(reason)  # type: ignore[attr-defined]

    def run_forever(self, duration: float | None = None) -> int:
        """Fire jobs until stop(), SIGTERM/SIGINT, or `duration` seconds; then wait for runs.

        stop() and the signals stop running jobs too; the end of `duration` lets them finish.
        """
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda s, _f: self.stop(f"stopped by {signal.Signals(s).name}"))
        if not self.jobs:
            log.warning("no job with a schedule to fire")
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
            self.stopping.wait(max(0.01, min(wait, 1.0)))
        # After --for, runs in flight finish; after stop() or a signal they were told to stop.
        for thread in self._threads:
            thread.join()
        self.sessions.close_all()
        log.info("scheduler stopped instance=%s", self.instance)
        return 0

    def _fire(self, job: Job, slot: datetime) -> None:
        thread = threading.Thread(target=self._attempt, args=(job, slot), daemon=True,
                                  name=f"lockconsole-job-{job.name}")  # fmt: skip
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _attempt(self, job: Job, slot: datetime) -> None:
        from .execute import resolve_callable, run_target
        from .runner import begin

        try:
            target = list(job.command) if job.command else None
            if target is None and job.callable:
                target = resolve_callable(job.callable)
            if target is None:
                log.error("job %s has no command or callable; not fired", job.name)
                return
            attempt = begin(job, self.config.database_for(job), self.config.ledger_for(job),
                            instance=self.instance, slot=slot,
                            sessions=self.sessions)  # fmt: skip
            if not attempt.acquired:
                return
            with self._lock:
                self._attempts[job.name] = attempt
            if self.stopping.is_set():
                attempt.request_stop("scheduler stopping")
            try:
                run_target(attempt, target, handle_signals=False)
            finally:
                with self._lock:
                    self._attempts.pop(job.name, None)
        except Exception as exc:  # one job's trouble must not stop the others
            log.error("job %s slot %s: %s", job.name, slot.isoformat(), exc)
