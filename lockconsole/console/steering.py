"""Steer the fleet from the console: pause and resume jobs (the ledger's control table), and
ask the fleet to run a job now (a run request); all audited."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.ledger import requests
from lockconsole.backends.ledger.pauses import MAX_NOTE, Pauses
from lockconsole.backends.ledger.requests import Request
from lockconsole.config.loader import Config
from lockconsole.console.connections import Connections
from lockconsole.model.errors import UsageError
from lockconsole.model.jobs import Job, Pause

DEFAULT_TIMEOUT = timedelta(minutes=1)  # a request no instance took by then expires


class Steering:
    """Pauses and run requests of the configured jobs, in each job's ledger database, audited."""

    def __init__(self, config: Config, connections: Connections, actor: Actor) -> None:
        self.config = config
        self.connections = connections
        self.actor = actor

    def _pauses(self, job: Job) -> Pauses:
        return Pauses(self.connections.ledger(self.config.ledger_for(job).name))

    def pauses(
        self, jobs: Iterable[Job], now: datetime, errors: dict[str, str]
    ) -> dict[str, Pause]:
        """The pauses in force of `jobs`; a ledger that fails adds to `errors` and hides none."""
        found: dict[str, Pause] = {}
        names = {job.name for job in jobs}
        for ledger_name in sorted({self.config.ledger_for(j).name for j in jobs}):
            if ledger_name in errors:
                continue
            try:
                pauses = Pauses(self.connections.ledger(ledger_name)).pauses(now)
            except Exception as exc:
                errors[ledger_name] = self.connections.error_text(ledger_name, exc)
                continue
            found.update((job, p) for job, p in pauses.items() if job in names)
        return found

    def _now(self, job: Job) -> datetime:
        """The ledger server's time now: pauses and requests are stamped and compared by it."""
        return self.connections.ledger(self.config.ledger_for(job).name).now()

    def pause(self, job_name: str, note: str, until: datetime | timedelta | None = None) -> Pause:
        """Pause a job on every instance until resumed, or until `until` (a time, or a duration
        from the ledger server's now); audited."""
        job = self.config.job(job_name)
        note = note.strip()
        if not note:
            raise UsageError("pause: give a note saying why (--note TEXT)")
        if len(note) > MAX_NOTE:
            raise UsageError(f"pause: the note is longer than {MAX_NOTE} characters")
        now = self._now(job)
        if isinstance(until, timedelta):
            until = now + until
        if until is not None and until <= now:
            raise UsageError(f"pause: --until {until.isoformat()} is not in the future")
        pause = Pause(job.name, note, f"{self.actor.os_user}@{self.actor.host}", now, until)
        audit = AuditLog(self.connections.sql_home(self.config.ledger_for(job)), job=job.name)
        try:
            entry = audit.begin(self.actor, "pause", f"{job.name}: {note}")
            try:
                self._pauses(job).pause(pause)
            except Exception as exc:
                audit.finish(entry, "error", str(exc))
                raise
            audit.finish(entry, "paused", pause.reason())
        finally:
            audit.close()
        return pause

    def resume(self, job_name: str) -> Pause | None:
        """End a job's pause; the pause that was in force (None: it was not paused). Audited."""
        job = self.config.job(job_name)
        audit = AuditLog(self.connections.sql_home(self.config.ledger_for(job)), job=job.name)
        try:
            entry = audit.begin(self.actor, "resume", job.name)
            try:
                ended = self._pauses(job).resume(job.name, self._now(job))
            except Exception as exc:
                audit.finish(entry, "error", str(exc))
                raise
            audit.finish(entry, "resumed" if ended else "not_paused")
        finally:
            audit.close()
        return ended

    def request(
        self,
        job_name: str,
        *,
        slot: datetime | None = None,
        instance: str | None = None,
        force: bool = False,
        timeout: timedelta = DEFAULT_TIMEOUT,
    ) -> int:
        """Ask the fleet to run a job now (or a slot again); the request's id. Audited."""
        job = self.config.job(job_name)
        if force and slot is None:
            raise UsageError("request: --force reruns a slot; give --slot TIME too")
        now = self._now(job)
        if slot is not None and slot > now:
            raise UsageError(f"request: --slot {slot.isoformat()} is in the future")
        where = f" on {instance}" if instance else ""
        what = f"{job.name}{where}" + (f" slot {slot.isoformat()}" if slot else "")
        audit = AuditLog(self.connections.sql_home(self.config.ledger_for(job)), job=job.name)
        try:
            entry = audit.begin(self.actor, "request_forced" if force else "request", what)
            try:
                request_id = requests.submit(
                    self.connections.ledger(self.config.ledger_for(job).name),
                    job.name,
                    slot=slot,
                    instance=instance,
                    forced=force,
                    requested_by=f"{self.actor.os_user}@{self.actor.host}",
                    now=now,
                    expires_at=now + timeout,
                )
            except Exception as exc:
                audit.finish(entry, "error", str(exc))
                raise
            audit.finish(entry, "queued", f"request {request_id}")
        finally:
            audit.close()
        return request_id

    def request_state(self, job_name: str, request_id: int) -> Request | None:
        """A request as it is now; a queued one past its expiry is marked expired first."""
        job = self.config.job(job_name)
        ledger = self.connections.ledger(self.config.ledger_for(job).name)
        found = requests.get(ledger, request_id)
        if found is not None and found.state == "queued" and found.expires_at <= ledger.now():
            requests.expire(ledger, ledger.now())
            found = requests.get(ledger, request_id)
        return found
