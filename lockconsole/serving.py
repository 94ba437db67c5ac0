"""Serve run requests (`lockconsole request`, the console's "on the fleet"): on every instance
that runs `lockconsole schedule`, or in a Python app that calls `serve_requests`.

A server looks for queued requests of its jobs (for this instance, or for any) in each ledger
database: on every PostgreSQL ledger database it LISTENs on `lockconsole_requests` (before its
first look, so no request falls between the two) and is woken by the NOTIFY the request sends
(`backends/ledger/wakeups.py`), and it looks every POLL_INTERVAL seconds too, which is how
requests reach it from MySQL/MariaDB and SQLite ledgers. The first instance whose UPDATE finds
a request still queued takes it and runs the job through the runner, under the job's lock, in
its own environment; the request row gets the run's id and then its outcome. Queued requests
past their expiry are marked expired.

    from lockconsole import serve_requests
    server = serve_requests({"nightly_billing": nightly_billing})  # a daemon thread
    ...
    server.stop()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lockconsole.backends.ledger import requests
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.wakeups import LISTEN_WAIT, Wakeups
from lockconsole.backends.threads import start_quiet
from lockconsole.model.jobs import Database, Job

if TYPE_CHECKING:
    from lockconsole.config.loader import Config
    from lockconsole.engine.execute import Target

log = logging.getLogger(__name__)
POLL_INTERVAL = 2.0  # seconds between looks for requests (PostgreSQL is also woken by NOTIFY)


class RequestServer:
    """Take and run the run requests of `jobs` on this instance, in a daemon thread."""

    def __init__(
        self,
        config: Config,
        jobs: Sequence[Job],
        *,
        instance: str,
        targets: Mapping[str, Target] | None = None,
        poll: float = POLL_INTERVAL,
    ) -> None:
        self.config = config
        self.jobs = {job.name: job for job in jobs}
        self.instance = instance
        self.targets = dict(targets or {})
        self.poll = poll
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._runs: list[threading.Thread] = []
        self._ledgers: dict[str, Ledger] = {}
        # one connection per ledger database for looking, taking and noting requests: the loop
        # and the runs it started take turns on it
        self._guard = threading.Lock()
        self.wake = threading.Event()  # set by a NOTIFY or a stop: look now
        self.looked = threading.Event()  # set once LISTEN is done and every ledger was looked at

    def start(self) -> RequestServer:
        from lockconsole.engine.scheduler import import_run_path

        import_run_path(self.config, list(self.jobs.values()))  # before our thread imports
        self._thread = threading.Thread(target=self._loop, daemon=True, name="lockconsole-serve")
        start_quiet(self._thread)
        return self

    def stop(self, wait: float = 30.0) -> None:
        """Stop looking for requests; wait (up to `wait` s) for the runs it started to end."""
        self.stopping.set()
        self.wake.set()
        if self._thread is not None:
            self._thread.join(wait)
        for run in self._runs:
            run.join(wait)
        with self._guard:  # a run's last note may have opened it again after the loop ended
            for name in list(self._ledgers):
                self._drop(name)

    # --- the loop ------------------------------------------------------------------------

    def _ledger_databases(self) -> dict[str, Database]:
        found: dict[str, Database] = {}
        for job in self.jobs.values():
            database = self.config.ledger_for(job)
            found[database.name] = database
        return found

    def _loop(self) -> None:
        databases = self._ledger_databases()
        wakeups = Wakeups(
            list(databases.values()), wake=self.wake, stopping=self.stopping, retry=self.poll
        )
        try:
            wakeups.start()  # LISTEN first: a request queued after the first look wakes us
            while not self.stopping.is_set():
                self.wake.clear()  # a NOTIFY from now on makes the wait below return at once
                for database in databases.values():
                    try:
                        self.serve_once(database)
                    except Exception as exc:  # a database away now: look again later
                        log.warning("requests on %s: %s", database.url.masked, exc)
                        with self._guard:
                            self._drop(database.name)
                self.looked.set()
                self.wake.wait(self.poll)  # a NOTIFY (PostgreSQL), the poll interval, or a stop
        finally:
            self.stopping.set()  # the listening threads end with the loop
            wakeups.join(LISTEN_WAIT * 4)
            with self._guard:
                for name in list(self._ledgers):
                    self._drop(name)

    def _drop(self, name: str) -> None:
        ledger = self._ledgers.pop(name, None)
        if ledger is not None:
            ledger.close()

    def _ledger(self, database: Database) -> Ledger:
        ledger = self._ledgers.get(database.name)
        if ledger is None:
            ledger = self._ledgers[database.name] = Ledger(
                database, application_name="lockconsole:requests"
            )
        return ledger

    def serve_once(self, database: Database) -> int:
        """Expire stale requests, then take and start the ones this instance may serve."""
        with self._guard:
            return self._serve_once(database)

    def _serve_once(self, database: Database) -> int:
        ledger = self._ledger(database)
        now = ledger.now()  # the server's clock: a fast instance must not expire the fleet's
        requests.expire(ledger, now)
        names = {n for n, j in self.jobs.items() if self.config.ledger_for(j).name == database.name}
        started = 0
        for request in requests.queued(ledger, names, self.instance, now):
            if self.stopping.is_set() or not requests.claim(ledger, request.id, self.instance, now):
                continue
            log.info("request %s: %s taken by %s", request.id, request.job, self.instance)
            thread = threading.Thread(
                target=self._serve, args=(request, database), daemon=True, name="lockconsole-req"
            )
            self._runs = [t for t in self._runs if t.is_alive()] + [thread]
            start_quiet(thread)
            started += 1
        return started

    def _serve(self, request: requests.Request, database: Database) -> None:
        """Run one taken request under the job's lock; the request row follows the run."""
        from lockconsole.engine.execute import run_target
        from lockconsole.engine.runner import begin

        job = self.jobs[request.job]

        def note(state: str, run_id: int | None = None, reason: str | None = None) -> None:
            def record(ledger: Ledger) -> None:
                requests.record(
                    ledger,
                    request.id,
                    self.instance,
                    state,
                    ledger.now(),
                    run_id=run_id,
                    reason=reason,
                )

            if database.url.dialect == "sqlite":  # its connection is the loop thread's alone
                with Ledger(database, application_name="lockconsole:requests") as own:
                    record(own)
                return
            with self._guard:  # the loop's connection, between its looks
                try:
                    record(self._ledger(database))
                except Exception:
                    self._drop(database.name)  # reconnected by the next use
                    raise

        try:
            target = self._target(job)
            attempt = begin(
                job,
                self.config.database_for(job),
                self.config.ledger_for(job),
                instance=self.instance,
                slot=request.slot,
                trigger="scheduled" if request.slot is not None else "manual",
                force=request.forced,
            )
            note("running", attempt.run.id)
            run = run_target(attempt, target, handle_signals=False)
        except Exception as exc:
            log.error("request %s of %s: %s", request.id, job.name, exc)
            note("error", reason=str(exc)[:1000])
            return
        note(run.outcome, run.id, run.message)
        log.info("request %s: %s %s (run %s)", request.id, job.name, run.outcome, run.id)

    def _target(self, job: Job) -> Target:
        if job.name in self.targets:
            return self.targets[job.name]
        from lockconsole.engine.execute import target_of

        target = target_of(job)
        if target is None:
            raise ValueError(f"job {job.name} has no command or callable to run here")
        return target


def serve_requests(
    targets: Mapping[str, Callable[..., Any]] | None = None,
    *,
    config: str | None = None,
    instance: str | None = None,
    jobs: Sequence[str] | None = None,
) -> RequestServer:
    """Serve run requests in this process: a daemon thread; stop() it when the app ends.

    `targets` maps job names to the functions to run (default: each job's command or callable
    from the config); only these jobs (or `jobs`, or every job in the config) are served.
    """
    from lockconsole.config.loader import load_config
    from lockconsole.engine.runner import default_instance

    cfg = load_config(config)
    names = list(jobs or targets or cfg.jobs)
    chosen = [cfg.job(name) for name in names]
    name = instance or default_instance(cfg.instance)
    return RequestServer(cfg, chosen, instance=name, targets=targets).start()
