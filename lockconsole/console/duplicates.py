"""The Console's duplicate inspector: summaries, pages, rows, DDL, CSV export, and the
background scans that feed the duplicates alert without slowing a snapshot."""

from __future__ import annotations

import logging
import time
from concurrent.futures import Executor, Future, wait
from typing import TYPE_CHECKING, Any

from lockconsole.config.loader import Config
from lockconsole.console.connections import Connections
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import Database, Idempotency, Job

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from lockconsole.backends.duplicates import DuplicatePage, DuplicateSummary
    from lockconsole.model.views import DuplicateGroup

log = logging.getLogger(__name__)


class Duplicates:
    """Everything that reads a job's idempotency table, and the latest scan of each."""

    def __init__(self, config: Config, connections: Connections, pool: Executor) -> None:
        self.config = config
        self.settings = config.console
        self._connections = connections
        self._pool = pool
        self._cache: dict[str, DuplicateSummary] = {}  # job -> the latest summary
        self._pending: dict[str, Future[DuplicateSummary]] = {}  # job -> the scan under way
        self._checked: dict[str, float] = {}  # job -> monotonic time of the last scan

    def page(self, job: str, *, page: int = 0, page_size: int = 50) -> DuplicatePage:
        """One page of the job's duplicate groups (paged by the database)."""
        from lockconsole.backends import duplicates

        spec = self._idempotency(job)
        return duplicates.groups(self._engine(job), spec, page=page, page_size=page_size)

    def of_runs(self, job: str, run_ids: list[int]) -> list[DuplicateGroup]:
        """The duplicate groups that carry these run ids (with a run_column)."""
        from lockconsole.backends.duplicates import groups_of_runs

        return groups_of_runs(self._engine(job), self._idempotency(job), run_ids)

    def summary(self, job: str) -> DuplicateSummary:
        from lockconsole.backends import duplicates

        return duplicates.summary(self._engine(job), self._idempotency(job))

    def rows(self, job: str, key: tuple[object, ...]) -> list[dict[str, Any]]:
        from lockconsole.backends import duplicates

        return duplicates.rows(self._engine(job), self._idempotency(job), key)

    def ddl(self, job: str) -> str:
        from lockconsole.backends import duplicates

        spec = self._idempotency(job)
        found = duplicates.summary(self._engine(job), spec)
        return duplicates.fix_ddl(self._database(job).url.dialect, spec, found)

    def export(self, job: str, path: str) -> int:
        """Write every duplicate row of the job's idempotency table to a CSV file; row count."""
        from lockconsole.backends import duplicates

        with open(path, "w", newline="", encoding="utf-8") as out:
            return duplicates.export_csv(self._engine(job), self._idempotency(job), out)

    def counts(self, jobs: list[Job], *, force: bool) -> dict[str, DuplicateSummary]:
        """Duplicate summaries per job: fresh when forced, else the latest background scan."""
        wanted = [j for j in jobs if j.idempotency]
        if force:
            futures = {j.name: self._pool.submit(self._count, j) for j in wanted}
            wait(futures.values(), timeout=self._connections.budget)
            for name, future in futures.items():
                try:
                    self._cache[name] = future.result(timeout=0)
                except Exception as exc:
                    log.warning("duplicates of %s: %s", name, exc)
            return {j.name: self._cache[j.name] for j in wanted if j.name in self._cache}
        clock = time.monotonic()
        every = self.settings.duplicates_every.total_seconds()
        for job in wanted:
            pending = self._pending.get(job.name)
            if pending is not None and pending.done():
                del self._pending[job.name]
                try:
                    self._cache[job.name] = pending.result()
                except Exception as exc:
                    log.warning("duplicates of %s: %s", job.name, exc)
            due = clock - self._checked.get(job.name, float("-inf")) >= every
            if job.name not in self._pending and due:
                self._checked[job.name] = clock
                self._pending[job.name] = self._pool.submit(self._count, job)
        return {j.name: self._cache[j.name] for j in wanted if j.name in self._cache}

    def _count(self, job: Job) -> DuplicateSummary:
        from lockconsole.backends import duplicates

        assert job.idempotency is not None
        return duplicates.summary(self._engine(job.name), job.idempotency)

    def _database(self, job: str) -> Database:
        return self._connections.sql_home(self.config.database_for(self.config.job(job)))

    def _engine(self, job: str) -> Engine:
        return self._connections.engine(self._database(job))

    def _idempotency(self, job: str) -> Idempotency:
        spec = self.config.job(job).idempotency
        if spec is None:
            raise ConfigError(f"job {job!r} has no [jobs.{job}.idempotency] table and key")
        return spec
