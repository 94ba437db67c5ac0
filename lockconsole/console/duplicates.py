"""The Console's duplicate inspector: summaries, pages, rows, DDL, CSV export, and the
background scans that feed the duplicates alert without slowing a snapshot."""

from __future__ import annotations

import logging
import time
from concurrent.futures import wait
from typing import Any

from lockconsole.console.connections import budget_of
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import Job

log = logging.getLogger("lockconsole.console.facade")


class DuplicatesMixin:
    """Part of Console: everything that reads a job's idempotency table."""

    config: Any
    settings: Any
    _lock: Any
    _pool: Any
    _engines: dict[str, Any]
    _dup_cache: dict[str, Any]
    _dup_pending: dict[str, Any]
    _dup_checked: dict[str, float]
    _timeouts: Any

    def _db(self, job: str) -> Any:
        raise NotImplementedError

    def duplicates(self, job: str, *, page: int = 0, page_size: int = 50) -> Any:
        """One page of the job's duplicate groups (paged by the database)."""
        from lockconsole.backends import duplicates

        spec = self._idempotency(job)
        return duplicates.groups(self._engine(job), spec, page=page, page_size=page_size)

    def duplicate_summary(self, job: str) -> Any:
        from lockconsole.backends import duplicates

        return duplicates.summary(self._engine(job), self._idempotency(job))

    def duplicate_rows(self, job: str, key: tuple[object, ...]) -> list[dict[str, Any]]:
        from lockconsole.backends import duplicates

        return duplicates.rows(self._engine(job), self._idempotency(job), key)

    def duplicate_ddl(self, job: str) -> str:
        from lockconsole.backends import duplicates

        spec = self._idempotency(job)
        found = duplicates.summary(self._engine(job), spec)
        return duplicates.fix_ddl(self._db(job).url.dialect, spec, found)

    def export_duplicates(self, job: str, path: str) -> int:
        """Write every duplicate row of the job's idempotency table to a CSV file; row count."""
        from lockconsole.backends import duplicates

        with open(path, "w", newline="", encoding="utf-8") as out:
            return duplicates.export_csv(self._engine(job), self._idempotency(job), out)

    def _duplicate_counts(self, jobs: list[Job], *, force: bool) -> dict[str, Any]:
        """Duplicate summaries per job: fresh when forced, else the latest background scan."""
        wanted = [j for j in jobs if j.idempotency]
        if force:
            futures = {j.name: self._pool.submit(self._duplicate_count, j) for j in wanted}
            wait(futures.values(), timeout=budget_of(self.settings))
            for name, future in futures.items():
                try:
                    self._dup_cache[name] = future.result(timeout=0)
                except Exception as exc:
                    log.warning("duplicates of %s: %s", name, exc)
            return {j.name: self._dup_cache[j.name] for j in wanted if j.name in self._dup_cache}
        clock = time.monotonic()
        every = self.settings.duplicates_every.total_seconds()
        for job in wanted:
            pending = self._dup_pending.get(job.name)
            if pending is not None and pending.done():
                del self._dup_pending[job.name]
                try:
                    self._dup_cache[job.name] = pending.result()
                except Exception as exc:
                    log.warning("duplicates of %s: %s", job.name, exc)
            due = clock - self._dup_checked.get(job.name, float("-inf")) >= every
            if job.name not in self._dup_pending and due:
                self._dup_checked[job.name] = clock
                self._dup_pending[job.name] = self._pool.submit(self._duplicate_count, job)
        return {j.name: self._dup_cache[j.name] for j in wanted if j.name in self._dup_cache}

    def _duplicate_count(self, job: Job) -> Any:
        from lockconsole.backends import duplicates

        assert job.idempotency is not None
        return duplicates.summary(self._engine(job.name), job.idempotency)

    def _engine(self, job: str) -> Any:
        """One pooled SQLAlchemy engine per database, for the duplicate inspector."""
        db = self._db(job)
        with self._lock:
            engine = self._engines.get(db.name)
            if engine is None:
                from lockconsole.backends.sa import engine_for

                engine = self._engines[db.name] = engine_for(
                    db.url, pool_pre_ping=True, timeouts=self._timeouts
                )
            return engine

    def _idempotency(self, job: str) -> Any:
        spec = self.config.job(job).idempotency
        if spec is None:
            raise ConfigError(f"job {job!r} has no [jobs.{job}.idempotency] table and key")
        return spec
