"""The Console facade: the one door the CLI and the TUI use for every view and action.

snapshot() reads every database in parallel (one database down never hides the others,
and a stopped or silent one never holds the snapshot past its time budget: console_parts),
trigger() runs a job here through the runner, release() force-releases a holder (audited,
refused in read-only mode), duplicates() and history() page through the rest.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import Any

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.inspect import HolderList, Inspector, ReleaseResult
from lockconsole.config.loader import Config
from lockconsole.config.urls import scrub
from lockconsole.console.connections import (
    Calls,
    WaitsMixin,
    budget_of,
    open_inspector,
    timeouts_of,
    wait_for,
)
from lockconsole.console.duplicates import DuplicatesMixin
from lockconsole.model.errors import ConfigError, DatabaseError, UsageError
from lockconsole.model.jobs import Database, Job, Run
from lockconsole.model.slots import next_fire, utcnow
from lockconsole.model.views import Alert, Holder, JobStatus, Snapshot

log = logging.getLogger("lockconsole.console.facade")
LEDGER_APPLICATION_NAME = "lockconsole:console-ledger"  # the console's ledger reads


class ReadOnlyError(UsageError):
    """A mutation was asked for in --read-only mode; nothing was done."""


class Console(DuplicatesMixin, WaitsMixin):
    """Snapshots and actions over one configuration; keeps its connections between calls."""

    def __init__(self, config: Config, *, read_only: bool = False, actor: Actor | None = None,
                 instance: str | None = None) -> None:  # fmt: skip
        self.config = config
        self.settings = config.console
        self.read_only = read_only
        self.actor = actor or Actor.current()
        self.instance = instance
        self._inspectors: dict[tuple[str, str | None], Inspector] = {}
        self._pooler: dict[str, Any] = {}
        self._ledgers: dict[str, Any] = {}  # one kept Ledger per ledger database
        self._engines: dict[str, Any] = {}
        self._dup_cache: dict[str, Any] = {}  # job -> the latest DuplicateSummary
        self._dup_pending: dict[str, Any] = {}  # job -> the scan under way (a Future)
        self._dup_checked: dict[str, float] = {}  # job -> monotonic time of the last scan
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lockconsole-db")
        self._timeouts = timeouts_of(self.settings)  # on every connection the console opens
        self._calls = Calls(self._pool)  # at most one outstanding read per database
        self._down: set[str] = set()  # databases with an error in the last snapshot
        self._last_errors: dict[str, str] = {}  # database -> its last real error
        self.last: Snapshot | None = None

    # --- reading -------------------------------------------------------------------------

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
        """Everything at one moment: jobs, holders (stale marked), runs, slots, alerts, errors.

        Idempotency tables are scanned for duplicates in the background at most every
        `[console] duplicates_every` (a scan of a large table takes seconds) and the last
        counts are used meanwhile; duplicates=True scans now and waits, False skips them.
        """
        from lockconsole.console.reports import alerts, slot_reports
        from lockconsole.console.stale import mark_stale

        now = utcnow()
        jobs = list(self.config.jobs.values())
        targets = self._inspection_targets()
        ledgers = sorted({self.config.ledger_for(j).name for j in jobs})
        budget, down = budget_of(self.settings), self._down
        holder_calls = {t: self._calls.start(("holders", *t), self._holders, *t) for t in targets}
        run_calls = {n: self._calls.start(("runs", n), self._runs, n, now) for n in ledgers}
        wait_for([*((c, t[0] in down) for t, c in holder_calls.items()),
                  *((c, n in down) for n, c in run_calls.items())], budget)  # fmt: skip
        errors: dict[str, str] = {}
        holders: list[Holder] = []
        sources: dict[str, str] = {}
        notes: list[tuple[str, str]] = []
        orphaned: set[int] | None = None  # pids of pooled server connections nobody holds
        for (db_name, table), call in holder_calls.items():
            answer = self._answer(("holders", db_name, table), call, db_name, budget, errors)
            if answer is None:
                continue
            listed: HolderList
            listed, orphans = answer
            if orphans is not None:
                orphaned = (orphaned or set()) | orphans
            holders.extend(listed.holders)
            label = f"{db_name}:{table}" if table else db_name
            sources[label] = listed.source
            notes.extend((label, note) for note in listed.notes)
        runs: list[Run] = []
        for name, call in run_calls.items():
            answer = self._answer(("runs", name), call, name, budget, errors)
            if answer is not None:
                runs.extend(answer)
        self._down = set(errors)
        self._last_errors = {k: v for k, v in self._last_errors.items() if k in errors}
        dup_counts = (
            {} if duplicates is False else self._duplicate_counts(jobs, force=bool(duplicates))
        )
        runs.sort(key=lambda r: (r.started_at, r.id or 0), reverse=True)
        runs, abandoned = self._sweep(runs, holders, errors, now)
        holders_t = mark_stale(holders, jobs, runs, now=now,
                               idle_threshold=self.settings.idle_threshold,
                               orphaned_pids=orphaned)  # fmt: skip
        reports = slot_reports(jobs, runs, now=now, lookback=self.settings.lookback,
                               grace=self.settings.grace)  # fmt: skip
        alert_list = list(alerts(reports, holders_t, dup_counts, jobs=jobs)) + self._pooler_alerts()
        alert_list += abandoned
        holding: dict[str | None, Holder] = {}  # each job's first granted holder
        for h in holders_t:
            if h.granted and h.job not in holding:
                holding[h.job] = h
        last_run = {r.job: r for r in reversed(runs)}  # each job's newest run
        snapshot = Snapshot(
            taken_at=now,
            jobs=tuple(
                JobStatus(j, next_fire(j, now), holding.get(j.name), last_run.get(j.name))
                for j in jobs
            ),
            holders=tuple(holders_t),
            runs=tuple(runs),
            slots=tuple(reports),
            alerts=tuple(alert_list),
            errors=tuple(sorted(errors.items())),
            sources=tuple(sorted(sources.items())),
            notes=tuple(notes),
        )
        self.last = snapshot
        return snapshot

    def _sweep(self, runs: list[Run], holders: list[Holder], errors: dict[str, str],
               now: datetime) -> tuple[list[Run], list[Alert]]:  # fmt: skip
        """Close attempts left acquired with their lock free (abandoned); read-only: report."""
        from lockconsole.console.abandoned import sweep

        def database_of(job: Job) -> Database | None:
            database = self.config.database_for(job)
            return None if database.name in errors else database

        return sweep(runs, holders, self.config.jobs, database_of,
                     lambda job: self._ledger(self.config.ledger_for(job).name),
                     close=not self.read_only, now=now)  # fmt: skip

    def history(self, job: str | None = None, *, limit: int = 200) -> list[Run]:
        """Recent attempts, newest first, from every ledger (or the one of `job`)."""
        if job is not None:
            self.config.job(job)
        names = {self.config.ledger_for(j).name for j in self.config.jobs.values()
                 if job is None or j.name == job}  # fmt: skip
        runs: list[Run] = []
        for name in sorted(names):
            runs.extend(self._read_runs(name, job, limit=limit))
        runs.sort(key=lambda r: (r.started_at, r.id or 0), reverse=True)
        return runs[:limit]

    # --- acting --------------------------------------------------------------------------

    def release(self, holder: Holder) -> ReleaseResult:
        """Force-release `holder` if it still holds that key; audited; refused when read-only."""
        self._refuse_if_read_only("force-release")
        if not holder.granted:
            return ReleaseResult("error", "only a granted holder can be released, not a waiter",
                                 holder)  # fmt: skip
        database = self.config.databases[holder.database]
        table = holder.source if holder.kind == "lease" else None
        inspector = self._inspector(database.name, table)
        audit = AuditLog(self._sql_home(database))
        try:
            return inspector.release(holder, actor=self.actor, audit=audit)
        finally:
            audit.close()

    def find_holders(self, *, pid: int | None = None, job: str | None = None,
                     database: str | None = None) -> list[Holder]:  # fmt: skip
        """Granted holders matching a pid or a job (from a fresh snapshot), for `release`."""
        if job is not None:
            self.config.job(job)
        if database is not None and database not in self.config.databases:
            raise ConfigError(f"no database named {database!r}")
        snap = self.snapshot(duplicates=False)
        return [
            h for h in snap.holders
            if h.granted
            and (pid is None or h.pid == pid)
            and (job is None or h.job == job)
            and (database is None or h.database == database)
        ]  # fmt: skip

    def trigger(self, job_name: str, *, output: Callable[[str], None] | None = None,
                instance: str | None = None, stop: Any = None) -> Run:  # fmt: skip
        """Run the job here now, under its lock (trigger = manual); skips if another holds it.

        `stop` (a stopping.Stop) ends the run at any step once requested; a stop before the
        lock was tried raises stopping.Stopped."""
        from lockconsole.engine.execute import resolve_callable, run_target
        from lockconsole.engine.runner import begin, default_instance

        self._refuse_if_read_only("trigger")
        job = self.config.job(job_name)
        if job.command:
            target: Any = list(job.command)
        elif job.callable:
            target = resolve_callable(job.callable)
        else:
            raise UsageError(f"job {job.name!r} has no command or callable to trigger")
        name = instance or self.instance or default_instance(self.config.instance)
        attempt = begin(job, self.config.database_for(job), self.config.ledger_for(job),
                        instance=name, trigger="manual", stop=stop)  # fmt: skip
        if not attempt.acquired:
            who = self._describe_holder(job)
            if who:
                attempt.run = replace(attempt.run, message=f"{attempt.run.message}: {who}")
            return attempt.run
        return run_target(attempt, target, handle_signals=False, output=output)

    def close(self) -> None:
        with self._lock:
            kept = [*self._inspectors.values(), *self._ledgers.values()]
            self._inspectors.clear()
            self._ledgers.clear()
        for inspector_or_ledger in kept:
            try:
                inspector_or_ledger.close()
            except Exception:
                pass
        for engine in self._engines.values():
            engine.dispose()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> Console:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- helpers -------------------------------------------------------------------------

    def _refuse_if_read_only(self, action: str) -> None:
        if self.read_only:
            raise ReadOnlyError(f"{action} refused: the console is in --read-only mode")

    def _inspection_targets(self) -> list[tuple[str, str | None]]:
        """(database, lease table or None) for every place where holders can be seen."""
        targets: set[tuple[str, str | None]] = set()
        for db in self.config.databases.values():
            if db.url.dialect in ("postgresql", "mysql", "redis"):
                targets.add((db.name, None))
        for job in self.config.jobs.values():
            if job.strategy == "lease":
                targets.add((job.database, job.lease_table))
        return sorted(targets, key=lambda t: (t[0], t[1] or ""))

    def _inspector(self, db_name: str, table: str | None) -> Inspector:
        with self._lock:
            found = self._inspectors.get((db_name, table))
            if found is not None:
                return found
        database = self.config.databases[db_name]
        inspector = open_inspector(database, table, self._timeouts)
        with self._lock:
            self._inspectors[(db_name, table)] = inspector
        return inspector

    def _holders(self, db_name: str, table: str | None) -> tuple[HolderList, set[int] | None]:
        """Holders, and (in the same worker thread) the database's orphaned pooled pids."""
        inspector = self._inspector(db_name, table)
        jobs = [j for j in self.config.jobs.values() if j.database == db_name]
        try:
            listed = inspector.holders(jobs)
        except Exception:
            with self._lock:  # drop it: the next snapshot reconnects
                if self._inspectors.get((db_name, table)) is inspector:
                    del self._inspectors[(db_name, table)]
            try:
                inspector.close()
            except Exception:
                pass
            raise
        return listed, (None if table else self._orphans_of(self.config.databases[db_name]))

    def _ledger(self, name: str) -> Any:
        """The kept Ledger of ledger database `name` (its engine and connection stay open)."""
        from lockconsole.backends.ledger.store import Ledger

        with self._lock:
            ledger = self._ledgers.get(name)
            if ledger is None:
                ledger = self._ledgers[name] = Ledger(
                    self.config.databases[name],
                    application_name=LEDGER_APPLICATION_NAME,
                    timeouts=self._timeouts,
                )
            return ledger

    def _read_runs(self, name: str, job: str | None = None, **kwargs: Any) -> list[Run]:
        ledger = self._ledger(name)
        try:
            runs = ledger.runs(job, **kwargs)
        except Exception:
            with self._lock:  # drop it: the next read reconnects
                if self._ledgers.get(name) is ledger:
                    del self._ledgers[name]
            try:
                ledger.close()
            except Exception:
                pass
            raise
        with self._lock:
            orphaned = self._ledgers.get(name) is not ledger  # given up on while it ran
        if orphaned:
            ledger.close()
        return runs

    def _runs(self, ledger_name: str, now: datetime) -> list[Run]:
        return self._read_runs(ledger_name, since=now - self.settings.lookback,
                               limit=self.settings.history_limit)  # fmt: skip

    def _orphans_of(self, db: Database) -> set[int] | None:
        """Pids of `db`'s pooled server connections with no client; None if none or unknown."""
        info = self._pooler_info(db)
        if info is None or not info.detected:
            return None
        from lockconsole.backends.postgres.pooler import orphaned_server_pids

        try:
            return orphaned_server_pids(db.url)
        except Exception as exc:
            log.debug("orphaned server pids of %s: %s", db.name, exc)
            return None

    def _pooler_info(self, db: Database) -> Any:
        if db.url.dialect != "postgresql":
            return None
        if db.name not in self._pooler:
            from lockconsole.backends.postgres.pooler import detect_pooler

            try:
                self._pooler[db.name] = detect_pooler(db.url)
            except Exception as exc:
                log.debug("pooler detection on %s failed: %s", db.name, exc)
                return None
        return self._pooler[db.name]

    def _pooler_alerts(self) -> list[Alert]:
        from lockconsole.backends.postgres.pooler import pooler_warnings

        out = []
        for db in self.config.databases.values():
            info = self._pooler.get(db.name)  # detected by the database's holders() worker
            if info is None:
                continue
            jobs = [j for j in self.config.jobs.values() if j.database == db.name]
            for warning in pooler_warnings(jobs, db, info):
                out.append(Alert("pooler", None, warning, database=db.name))
        return out

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

    def _db(self, job: str) -> Database:
        return self._sql_home(self.config.database_for(self.config.job(job)))

    def _sql_home(self, db: Database) -> Database:
        """Where `db`'s audit and idempotency tables live: Redis has none, the ledger's SQL has."""
        if db.url.dialect == "redis" and self.config.ledger_database:
            return self.config.databases[self.config.ledger_database]
        return db

    def _error_text(self, db_name: str, exc: BaseException) -> str:
        db = self.config.databases.get(db_name)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, DatabaseError) or db is None:
            return text if db is None else scrub(text, db.url)
        return scrub(f"{type(exc).__name__}: {text}", db.url)
