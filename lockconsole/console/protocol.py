"""What the CLI and the TUI may ask of a console: the Console facade's public surface.

Console (over real databases) and tools.sample_console.SampleConsole (over a fixed data set) both
satisfy ConsoleFacade; callers type against it, not against either class, and catch the
ReadOnlyError it raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from lockconsole.model.errors import UsageError

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from lockconsole.backends.audit import AuditEntry
    from lockconsole.backends.duplicates import DuplicatePage, DuplicateSummary
    from lockconsole.backends.inspect import ReleaseResult
    from lockconsole.backends.ledger.outputs import RunOutput
    from lockconsole.backends.ledger.requests import Request
    from lockconsole.config.loader import Config
    from lockconsole.engine.stopping import Stop
    from lockconsole.model.jobs import Pause, Run
    from lockconsole.model.views import Holder, JournalEntry, RunFilter, SlotStory, Snapshot


class ReadOnlyError(UsageError):
    """A mutation was asked for in --read-only mode; nothing was done."""


class ConsoleFacade(Protocol):
    """Snapshots, history, actions and the duplicate inspector over one configuration."""

    config: Config
    read_only: bool  # every mutation (trigger, release) raises ReadOnlyError
    instance: str | None  # the instance its triggers run as (None: the config's, or the host's)

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
        """Everything at one moment; duplicates: True scans now, False skips, None = latest."""
        ...

    def history(
        self, job: str | None = None, *, limit: int = 200, where: RunFilter | None = None
    ) -> list[Run]:
        """Recent attempts, newest first, of every job or of `job`, kept by `where`."""
        ...

    def audit(
        self, job: str | None = None, *, since: datetime | None = None, limit: int = 200
    ) -> tuple[list[AuditEntry], list[tuple[str, str]]]:
        """Force-releases and triggers, newest first; (database, error) of those unread."""
        ...

    def find_holders(
        self, *, pid: int | None = None, job: str | None = None, database: str | None = None
    ) -> list[Holder]:
        """Granted holders matching a pid or a job, from a fresh snapshot."""
        ...

    def release(self, holder: Holder) -> ReleaseResult:
        """Force-release `holder` if it still holds that key (audited)."""
        ...

    def trigger(
        self,
        job_name: str,
        *,
        output: Callable[[str], None] | None = None,
        instance: str | None = None,
        stop: Stop | None = None,
    ) -> Run:
        """Run the job here now, under its lock; the finished (or skipped) Run."""
        ...

    def request(
        self,
        job_name: str,
        *,
        slot: datetime | None = None,
        instance: str | None = None,
        force: bool = False,
        timeout: timedelta | None = None,
    ) -> int:
        """Ask the fleet to run a job now, or a slot again (audited); the request's id."""
        ...

    def request_state(self, job_name: str, request_id: int) -> Request | None:
        """A run request as it is now."""
        ...

    def run_output(
        self, run_id: int, *, ledger: str | None = None, job: str | None = None
    ) -> RunOutput | None:
        """A run's kept output tail (or traceback), from `ledger` or `job`'s ledger when given
        (run ids are per ledger); None when no ledger has the run."""
        ...

    def pause(self, job_name: str, note: str, until: datetime | timedelta | None = None) -> Pause:
        """Pause a job on every instance until resumed or `until`: a time, or a duration from
        the ledger server's now (audited)."""
        ...

    def resume(self, job_name: str) -> Pause | None:
        """End a job's pause (audited); the pause that ended, or None."""
        ...

    def holders_at(
        self, at: datetime, *, key: str | None = None, job: str | None = None
    ) -> tuple[list[JournalEntry], list[tuple[str, str]]]:
        """Who may have held which lock at `at`, from the holder journal, and (database, why)
        for each journal that could not be read."""
        ...

    def story(self, job_name: str, slot: datetime) -> SlotStory:
        """The story of one slot of one job: attempts, holders, audit, alerts, verdict."""
        ...

    def duplicates(self, job: str, *, page: int = 0, page_size: int = 50) -> DuplicatePage:
        """One page of the job's duplicate groups."""
        ...

    def duplicate_summary(self, job: str) -> DuplicateSummary: ...

    def duplicate_rows(self, job: str, key: tuple[object, ...]) -> list[dict[str, Any]]: ...

    def duplicate_ddl(self, job: str) -> str: ...

    def export_duplicates(self, job: str, path: str) -> int:
        """Every duplicate row of the job's idempotency table to a CSV file; the row count."""
        ...

    def close(self) -> None: ...
