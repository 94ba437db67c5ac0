"""The Console facade: the one door the CLI and the TUI use for every view and action.

snapshot() reads every database in parallel (one database down never hides the others,
and a stopped or silent one never holds the snapshot past its time budget: Connections),
trigger() runs a job here through the runner, release() force-releases a holder (audited,
refused in read-only mode), duplicates() and history() page through the rest. The Console
composes a Connections (connections and reads) and a Duplicates (the duplicate inspector)
and delegates to them; console.protocol.ConsoleFacade is what callers may use of it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from lockconsole.backends.audit import Actor, AuditEntry, AuditLog, audited_trigger
from lockconsole.backends.inspect import ReleaseResult
from lockconsole.config.loader import Config
from lockconsole.console.connections import Connections
from lockconsole.console.duplicates import Duplicates
from lockconsole.console.journal import HolderJournal
from lockconsole.console.protocol import ReadOnlyError
from lockconsole.console.snapshot.held import Sightings
from lockconsole.console.steering import DEFAULT_TIMEOUT, Steering
from lockconsole.model.errors import ConfigError, DatabaseError, UsageError
from lockconsole.model.jobs import Database, Job, Pause, Run
from lockconsole.model.slots import next_fire, utcnow
from lockconsole.model.views import (
    Alert,
    Holder,
    JobStatus,
    JournalEntry,
    RunFilter,
    SlotStory,
    Snapshot,
)

if TYPE_CHECKING:
    from lockconsole.backends.duplicates import DuplicatePage, DuplicateSummary
    from lockconsole.backends.ledger.outputs import RunOutput
    from lockconsole.backends.ledger.requests import Request
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.engine.stopping import Stop

LEDGER_APPLICATION_NAME = "lockconsole:console-ledger"  # the console's ledger reads


class Console:
    """Snapshots and actions over one configuration; keeps its connections between calls."""

    def __init__(
        self,
        config: Config,
        *,
        read_only: bool = False,
        actor: Actor | None = None,
        instance: str | None = None,
        journal: bool = False,
    ) -> None:
        """`journal`: write the holder journal from each snapshot: for the long-running
        samplers (the console unless read-only, the metrics exporter, `schedule`), never a
        one-shot command, which would see holders appear and never go."""
        self.config = config
        self.settings = config.console
        self.read_only = read_only
        self.actor = actor or Actor.current()
        self.instance = instance
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lockconsole-db")
        self.connections = Connections(
            config, self._pool, ledger_application_name=LEDGER_APPLICATION_NAME, read_only=read_only
        )
        self.dupes = Duplicates(config, self.connections, self._pool)
        self.steering = Steering(config, self.connections, self.actor)
        self.sightings = Sightings()  # when each holder was first seen: how long it is held
        self.journal = HolderJournal(config, self._journal_engine) if journal else None
        self.last: Snapshot | None = None

    # --- reading -------------------------------------------------------------------------

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
        """Everything at one moment: jobs, holders (stale marked), runs, slots, alerts, errors.

        Duplicates: scanned in the background every `[console] duplicates_every` at most (the
        last counts meanwhile); duplicates=True scans now and waits, False skips them.
        """
        from lockconsole.console.snapshot.ledger_view import merged
        from lockconsole.console.snapshot.reports import alerts, clock_alerts, judge_slots
        from lockconsole.console.snapshot.stale import mark_stale

        jobs = list(self.config.jobs.values())
        ledgers = sorted({self.config.ledger_for(j).name for j in jobs})
        # one moment for every read and every judgement: the ledger server's time when the
        # reads begin (their windows start at now - lookback, and taken_at is that same now)
        began = time.monotonic()
        known = self.connections.known_server_now(ledgers)
        now = known or utcnow()
        reads = self.connections.read(self.connections.targets(), ledgers, now)
        errors = reads.errors
        if known is None:  # the first reading is taken after the reads: back to their start
            server = self.connections.server_now(ledgers, errors)
            if server is not None:
                now = server - timedelta(seconds=time.monotonic() - began)
        holders: list[Holder] = []
        sources: dict[str, str] = {}
        notes: list[tuple[str, str]] = []
        orphaned: set[int] | None = None  # pids of pooled server connections nobody holds
        for (db_name, table), (listed, orphans) in reads.holders.items():
            if orphans is not None:
                orphaned = (orphaned or set()) | orphans
            holders.extend(listed.holders)
            label = f"{db_name}:{table}" if table else db_name
            sources[label] = listed.source
            notes.extend((label, note) for note in listed.notes)
        notes.extend(self.connections.missing_notes(ledgers, errors))
        seen = merged(reads.ledgers.values())
        runs = sorted(seen.runs, key=lambda r: (r.started_at, r.id or 0), reverse=True)
        dup_counts = {} if duplicates is False else self.dupes.counts(jobs, force=bool(duplicates))
        runs, abandoned = self._sweep(runs, holders, errors, now)
        earliest = None
        if self.journal is not None:
            self.journal.observe(holders, now, errors)
            earliest = self.journal.first_seen
            notes.extend((home, f"holder journal not written: {why}")
                         for home, why in sorted(self.journal.problems.items()))  # fmt: skip
        holders_t = mark_stale(
            self.sightings.stamp(holders, now, errors, earliest=earliest),
            jobs,
            runs,
            now=now,
            idle_threshold=self.settings.idle_threshold,
            orphaned_pids=orphaned,
        )
        pauses = self.steering.pauses(jobs, now, errors)
        reports = judge_slots(
            jobs,
            seen.tallies,
            now=now,
            lookback=self.settings.lookback,
            grace=self.settings.grace,
            first_seen=seen.first_seen,
            pauses=pauses,
        )
        # runs of jobs another configuration shares the ledger with: shown, never alerted here
        ours = [r for r in reports if r.job in self.config.jobs]
        alert_list = list(alerts(ours, holders_t, dup_counts, jobs=jobs))
        alert_list += self.connections.pooler_alerts()
        alert_list += abandoned
        alert_list += clock_alerts(runs, self.settings.clock_skew)
        holding: dict[str | None, Holder] = {}  # each job's first granted holder
        for h in holders_t:
            if h.granted and h.job not in holding:
                holding[h.job] = h
        last_run = {r.job: r for r in reversed(runs)}  # each job's newest run
        snapshot = Snapshot(
            taken_at=now,
            jobs=tuple(
                JobStatus(
                    j,
                    next_fire(j, now),
                    holding.get(j.name),
                    last_run.get(j.name),
                    pauses.get(j.name),
                    seen.last_success.get(j.name),
                )
                for j in jobs
            ),
            holders=tuple(holders_t),
            runs=tuple(runs),
            slots=tuple(reports),
            alerts=tuple(alert_list),
            errors=tuple(sorted(errors.items())),
            sources=tuple(sorted(sources.items())),
            notes=tuple(notes),
            duplicates=tuple(
                (job, summary.groups, summary.surplus_rows)
                for job, summary in sorted(dup_counts.items())
            ),
            read_seconds=tuple(sorted(reads.seconds.items())),
            attempts=tuple((*k, n) for k, n in sorted(seen.attempts.items())),
        )
        self.last = snapshot
        return snapshot

    def _journal_engine(self, name: str) -> Any:
        return self.connections.ledger(name).sa_engine()

    def _sweep(
        self, runs: list[Run], holders: list[Holder], errors: dict[str, str], now: datetime
    ) -> tuple[list[Run], list[Alert]]:
        """Close attempts left acquired with their lock free (abandoned); read-only: report."""
        from lockconsole.console.abandoned import sweep

        def database_of(job: Job) -> Database | None:
            database = self.config.database_for(job)
            return None if database.name in errors else database

        return sweep(
            runs,
            holders,
            self.config.jobs,
            database_of,
            lambda job: self.connections.ledger(self.config.ledger_for(job).name),
            close=not self.read_only,
            now=now,
        )

    def history(
        self, job: str | None = None, *, limit: int = 200, where: RunFilter | None = None
    ) -> list[Run]:
        """Recent attempts, newest first, from every ledger (or the one of `job`)."""
        if job is not None:
            self.config.job(job)
        names = {
            self.config.ledger_for(j).name
            for j in self.config.jobs.values()
            if job is None or j.name == job
        }
        runs: list[Run] = []
        for name in sorted(names):
            runs.extend(self.connections.read_runs(name, job, limit=limit, where=where))
        runs.sort(key=lambda r: (r.started_at, r.id or 0), reverse=True)
        return runs[:limit]

    def audit(
        self, job: str | None = None, *, since: datetime | None = None, limit: int = 200
    ) -> tuple[list[AuditEntry], list[tuple[str, str]]]:
        """Force-releases and triggers, newest first, from every SQL database's audit table
        (each read once), and (database, error) for each one that could not be read."""
        if job is not None:
            self.config.job(job)
        homes = {
            home.name: home
            for home in map(self.connections.sql_home, self.config.databases.values())
            if home.url.dialect != "redis"
        }
        entries: list[AuditEntry] = []
        errors: list[tuple[str, str]] = []
        bounds = self.connections.timeouts  # a hung database never hangs the read
        for name in sorted(homes):
            try:
                log = AuditLog(homes[name], read_only=self.read_only, timeouts=bounds)
            except Exception as exc:  # a driver missing or a URL refused: that database only
                errors.append((name, " ".join(str(exc).split())))
                continue
            try:
                entries.extend(log.entries(limit, job=job, since=since))
            except DatabaseError as exc:
                errors.append((name, str(exc)))
            finally:
                log.close()
        entries.sort(key=lambda e: (e.at, e.id), reverse=True)
        return entries[:limit], errors

    # --- the duplicate inspector ---------------------------------------------------------

    # --- the past: the holder journal and the story of a slot ------------------------------

    def holders_at(
        self, at: datetime, *, key: str | None = None, job: str | None = None
    ) -> tuple[list[JournalEntry], list[tuple[str, str]]]:
        """Who may have held which lock at `at`, from every journal database (read once
        each), and (database, why) for each journal that could not be read."""
        from lockconsole.backends.ledger import journal as store
        from lockconsole.console.journal import journal_home

        if job is not None:
            self.config.job(job)
        homes = sorted({h for d in self.config.databases if (h := journal_home(self.config, d))})
        found: list[JournalEntry] = []
        errors: list[tuple[str, str]] = []
        for home in homes:
            try:
                engine = self.connections.ledger(home).sa_engine()
                if store.has_journal(engine):
                    found += store.held_at(engine, at, key=key, job=job)
                else:
                    errors.append((home, "no holder journal yet: no sampler has written one"))
            except Exception as exc:
                errors.append((home, " ".join(str(exc).split())[:300]))
        found.sort(key=lambda e: (e.first_seen, e.database, e.key, e.id))
        return found, errors

    def story(self, job_name: str, slot: datetime) -> SlotStory:
        """The story of one slot of one job (see console/story.py)."""
        from lockconsole.console.story import StorySources, tell

        job = self.config.job(job_name)
        sources = StorySources(
            config=self.config,
            ledger_named=self.connections.ledger,
            audit=lambda name, since: self.audit(name, since=since, limit=1000),
            duplicates=lambda j, ids: self.dupes.of_runs(j.name, ids),
            grace=self.settings.grace,
        )
        return tell(sources, job, slot)

    def duplicates(self, job: str, *, page: int = 0, page_size: int = 50) -> DuplicatePage:
        """One page of the job's duplicate groups (paged by the database)."""
        return self.dupes.page(job, page=page, page_size=page_size)

    def duplicate_summary(self, job: str) -> DuplicateSummary:
        return self.dupes.summary(job)

    def duplicate_rows(self, job: str, key: tuple[object, ...]) -> list[dict[str, Any]]:
        return self.dupes.rows(job, key)

    def duplicate_ddl(self, job: str) -> str:
        return self.dupes.ddl(job)

    def export_duplicates(self, job: str, path: str) -> int:
        """Write every duplicate row of the job's idempotency table to a CSV file; row count."""
        return self.dupes.export(job, path)

    # --- acting --------------------------------------------------------------------------

    def release(self, holder: Holder) -> ReleaseResult:
        """Force-release `holder` if it still holds that key; audited; refused when read-only."""
        self._refuse_if_read_only("force-release")
        if not holder.granted:
            return ReleaseResult(
                "error", "only a granted holder can be released, not a waiter", holder
            )
        database = self.config.databases[holder.database]
        table = holder.source if holder.kind == "lease" else None
        inspector = self.connections.inspector(database.name, table)
        audit = AuditLog(self.connections.sql_home(database), job=holder.job)
        try:
            return inspector.release(holder, actor=self.actor, audit=audit)
        finally:
            audit.close()

    def find_holders(
        self, *, pid: int | None = None, job: str | None = None, database: str | None = None
    ) -> list[Holder]:
        """Granted holders matching a pid or a job (from a fresh snapshot), for `release`; none
        found where a database it could be in was not read is a DatabaseError, never 'none'."""
        if database is not None and database not in self.config.databases:
            raise ConfigError(f"no database named {database!r}")
        where = {database or (self.config.job(job).database if job else "")} - {""}
        snap = self.snapshot(duplicates=False)
        found = [h for h in snap.holders if h.granted and (not where or h.database in where)
                 and (pid is None or h.pid == pid) and (job is None or h.job == job)]  # fmt: skip
        unread = [f"{n}: {e}" for n, e in snap.errors if not where or n in where]
        if not found and unread:
            raise DatabaseError(f"not read, nothing was done: {'; '.join(unread)}")
        return found

    def trigger(
        self,
        job_name: str,
        *,
        output: Callable[[str], None] | None = None,
        instance: str | None = None,
        stop: Stop | None = None,
    ) -> Run:
        """Run the job here now, under its lock (trigger = manual); skips if another holds it.

        `stop` (a stopping.Stop) ends the run at any step once requested; a stop before the
        lock was tried raises stopping.Stopped."""
        from lockconsole.engine.execute import run_target, target_of
        from lockconsole.engine.runner import begin, default_instance

        self._refuse_if_read_only("trigger")
        job = self.config.job(job_name)
        target = target_of(job)
        if target is None:
            raise UsageError(f"job {job.name!r} has no command or callable to trigger")
        name = instance or self.instance or default_instance(self.config.instance)

        def act() -> Run:
            attempt = begin(
                job,
                self.config.database_for(job),
                self.config.ledger_for(job),
                instance=name,
                trigger="manual",
                stop=stop,
                actor=str(self.actor),
            )
            if not attempt.acquired:
                who = self._describe_holder(job)
                if who:
                    attempt.run = replace(attempt.run, message=f"{attempt.run.message}: {who}")
                return attempt.run
            return run_target(attempt, target, handle_signals=False, output=output)

        # audited in the job's ledger database, before anything is tried
        run: Run = audited_trigger(self.config.ledger_for(job), self.actor, job.name, name, act)
        return run

    def run_output(
        self, run_id: int, *, ledger: str | None = None, job: str | None = None
    ) -> RunOutput | None:
        """A run's kept output (see console/outputs.py: run ids are per ledger)."""
        from lockconsole.console.outputs import find_output

        return find_output(self.config, self.connections.ledger, run_id, ledger=ledger, job=job)

    def pause(self, job_name: str, note: str, until: datetime | timedelta | None = None) -> Pause:
        """Pause a job on every instance (audited); refused when read-only."""
        self._refuse_if_read_only("pause")
        return self.steering.pause(job_name, note, until)

    def resume(self, job_name: str) -> Pause | None:
        """End a job's pause (audited); the pause that ended, or None; refused when read-only."""
        self._refuse_if_read_only("resume")
        return self.steering.resume(job_name)

    def request(
        self,
        job_name: str,
        *,
        slot: datetime | None = None,
        instance: str | None = None,
        force: bool = False,
        timeout: timedelta | None = None,
    ) -> int:
        """Ask the fleet to run a job now, or a slot again (audited); refused when read-only."""
        self._refuse_if_read_only("request")
        timeout = timeout or DEFAULT_TIMEOUT
        return self.steering.request(
            job_name, slot=slot, instance=instance, force=force, timeout=timeout
        )

    def request_state(self, job_name: str, request_id: int) -> Request | None:
        """A run request as it is now (queued, running on an instance, its outcome, expired)."""
        return self.steering.request_state(job_name, request_id)

    def close(self) -> None:
        self.connections.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers -------------------------------------------------------------------------

    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{action} refused: the console is in --read-only mode")

    def _describe_holder(self, job: Job) -> str | None:
        try:
            snap = self.snapshot(duplicates=False)
        except Exception:
            return None
        holder = next((h for h in snap.holders if h.job == job.name and h.granted), None)
        if holder is None:
            return None
        who = holder.instance or holder.application_name or holder.locked_by or "?"
        pid = f"pid {holder.pid}" if holder.pid else holder.kind
        return f"held by {who} ({pid})"


if TYPE_CHECKING:

    def _is_a_facade(console: Console) -> ConsoleFacade:
        return console  # mypy checks that Console satisfies the protocol
