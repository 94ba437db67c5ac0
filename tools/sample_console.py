"""A Console stand-in over the fixed sample data (tools/sample.py), for the TUI tests, the
screenshots and the console benchmarks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lockconsole.backends.inspect import ReleaseResult
from lockconsole.model.jobs import Idempotency, Pause, Run
from lockconsole.model.views import (
    AuditEntry,
    Holder,
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

from tools.sample import (
    FROZEN_NOW,
    make_run,
    sample_config,
    sample_duplicates,
    sample_journal,
    sample_snapshot,
)


class SampleConsole:
    """The Console facade's surface (ConsoleFacade) over the fixed data set (no database)."""

    def __init__(self, *, read_only: bool = False, holders: list[Holder] | None = None) -> None:
        self.config = sample_config()
        self.read_only = read_only
        self.instance: str | None = (
            "ops-1"  # the console's own instance (the header): not the host's name
        )
        self._snapshot = sample_snapshot()
        if holders is not None:
            self._snapshot = replace(self._snapshot, holders=tuple(holders))
        self._lock = threading.Lock()
        self.released: list[Holder] = []
        self.triggered: list[str] = []
        self.requested: list[tuple[str, str | None]] = []
        self.requested_slots: list[datetime | None] = []
        self._asked: dict[int, int] = {}

    def snapshot(self, *, duplicates: bool | None = None) -> Snapshot:
        with self._lock:
            return self._snapshot

    def set_snapshot(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._snapshot = snapshot

    def history(
        self, job: str | None = None, *, limit: int = 200, where: RunFilter | None = None
    ) -> list[Run]:
        def kept(r: Run) -> bool:
            w = where or RunFilter()
            return (
                (job is None or r.job == job)
                and all(
                    v is None or getattr(r, k) == v
                    for k, v in (("instance", w.instance), ("outcome", w.outcome), ("slot", w.slot))
                )
                and (w.since is None or r.started_at >= w.since)
                and (w.until is None or r.started_at < w.until)
            )

        return [r for r in self._snapshot.runs if kept(r)][:limit]

    def audit(
        self, job: str | None = None, *, since: datetime | None = None, limit: int = 200
    ) -> tuple[list[AuditEntry], list[tuple[str, str]]]:
        entries = [
            AuditEntry(
                2,
                FROZEN_NOW - timedelta(minutes=3),
                "alice",
                "ops-1",
                "trigger",
                "billing",
                "job nightly_billing on instance ops-1",
                "succeeded",
                "run 999 (exit 0)",
                "nightly_billing",
            ),
            AuditEntry(
                1,
                FROZEN_NOW - timedelta(minutes=9),
                "alice",
                "ops-1",
                "release",
                "billing",
                "pg advisory key 4242 (int64) held by pid 31337 in database billing",
                "released",
                "pid 31337 terminated in 12 ms",
                "nightly_billing",
            ),
        ]
        kept = [
            e for e in entries if (job is None or e.job == job) and (since is None or e.at >= since)
        ]
        return kept[:limit], []

    def find_holders(
        self, *, pid: int | None = None, job: str | None = None, database: str | None = None
    ) -> list[Holder]:
        with self._lock:
            holders = self._snapshot.holders
        return [
            h
            for h in holders
            if h.granted
            and (pid is None or h.pid == pid)
            and (job is None or h.job == job)
            and (database is None or h.database == database)
        ]

    def release(self, holder: Holder) -> ReleaseResult:
        from lockconsole.console.protocol import ReadOnlyError

        if self.read_only:
            raise ReadOnlyError("force-release refused: the console is in --read-only mode")
        with self._lock:
            self.released.append(holder)
            kept = tuple(h for h in self._snapshot.holders if h != holder)
            self._snapshot = replace(self._snapshot, holders=kept)
        return ReleaseResult("released", f"pid {holder.pid} terminated in 12 ms", holder)

    def trigger(
        self,
        job_name: str,
        *,
        output: Callable[[str], None] | None = None,
        instance: str | None = None,
        stop: Stop | None = None,
    ) -> Run:
        from lockconsole.console.protocol import ReadOnlyError

        if self.read_only:
            raise ReadOnlyError("trigger refused: the console is in --read-only mode")
        self.triggered.append(job_name)
        for line in ("billing 120 tenants", "charged 120, skipped 0 (already invoiced)"):
            if output:
                output(line)
        return make_run(
            999, job_name, FROZEN_NOW, instance or "ops-1", "succeeded", 0, 3, trigger="manual"
        )

    def request(
        self,
        job_name: str,
        *,
        slot: datetime | None = None,
        instance: str | None = None,
        force: bool = False,
        timeout: timedelta | None = None,
    ) -> int:
        from lockconsole.console.protocol import ReadOnlyError

        if self.read_only:
            raise ReadOnlyError("request refused: the console is in --read-only mode")
        with self._lock:
            self.requested.append((job_name, instance))
            self.requested_slots.append(slot)
            return len(self.requested)

    def request_state(self, job_name: str, request_id: int) -> Request | None:
        """The sample fleet moves a request on by one state each time it is asked."""
        from lockconsole.backends.ledger.requests import Request

        with self._lock:
            if not 0 < request_id <= len(self.requested):
                return None
            asked = self._asked[request_id] = self._asked.get(request_id, 0) + 1
        states = [("queued", None, None), ("running", "web-2", 999), ("succeeded", "web-2", 999)]
        state, by, run_id = states[min(asked, 3) - 1]
        at = FROZEN_NOW
        return Request(
            request_id,
            job_name,
            None,
            None,
            False,
            state,
            by,
            run_id,
            "ops@console",
            at,
            at,
            at + timedelta(minutes=1),
            None,
        )

    def run_output(
        self, run_id: int, *, ledger: str | None = None, job: str | None = None
    ) -> RunOutput | None:
        from lockconsole.backends.ledger.outputs import RunOutput

        run = next((r for r in self._snapshot.runs if r.id == run_id), None)
        if run is None:
            return None
        text = "billing 120 tenants\ncharged 120, skipped 0 (already invoiced)\n"
        return RunOutput(run_id, run.job, run.outcome, text)

    def pause(self, job_name: str, note: str, until: datetime | timedelta | None = None) -> Pause:
        from lockconsole.console.protocol import ReadOnlyError

        if isinstance(until, timedelta):
            until = FROZEN_NOW + until
        if self.read_only:
            raise ReadOnlyError("pause refused: the console is in --read-only mode")
        pause = Pause(job_name, note, "ops@console", FROZEN_NOW, until)
        with self._lock:
            self._set_pause(job_name, pause)
        return pause

    def resume(self, job_name: str) -> Pause | None:
        from lockconsole.console.protocol import ReadOnlyError

        if self.read_only:
            raise ReadOnlyError("resume refused: the console is in --read-only mode")
        with self._lock:
            ended = next((s.pause for s in self._snapshot.jobs if s.job.name == job_name), None)
            self._set_pause(job_name, None)
        return ended

    def _set_pause(self, job_name: str, pause: Pause | None) -> None:
        jobs = tuple(
            replace(s, pause=pause) if s.job.name == job_name else s for s in self._snapshot.jobs
        )
        self._snapshot = replace(self._snapshot, jobs=jobs)

    def holders_at(
        self, at: datetime, *, key: str | None = None, job: str | None = None
    ) -> tuple[list[JournalEntry], list[tuple[str, str]]]:
        until = lambda e: e.gone_by is None or e.gone_by > at  # noqa: E731
        found = [
            e
            for e in sample_journal()
            if e.earliest <= at and until(e) and key in (None, e.key) and job in (None, e.job)
        ]
        return found, []

    def story(self, job_name: str, slot: datetime) -> SlotStory:
        from lockconsole.console.snapshot.reports import alerts
        from lockconsole.model.story import events, verdict
        from lockconsole.model.verdict import executions, overlap_seconds, slot_status
        from lockconsole.model.views import SlotReport

        self.config.job(job_name)
        attempts = sorted(
            (r for r in self._snapshot.runs if r.job == job_name and r.slot == slot),
            key=lambda r: (r.started_at, r.id or 0),
        )
        since, until = slot - timedelta(minutes=2), slot + timedelta(minutes=15)
        journal = [
            e
            for e in sample_journal()
            if e.job == job_name and e.earliest <= until and (e.gone_by or FROZEN_NOW) >= since
        ]
        audit, _ = self.audit(job_name)
        audit.append(  # the unguarded night's release of the psql session (the story's alone)
            AuditEntry(
                0,
                datetime(2026, 11, 27, 2, 0, 6, tzinfo=UTC),
                "alice",
                "ops-1",
                "release",
                "billing",
                "pg advisory key 4242 (int64) held by pid 30412 in database billing",
                "released",
                "pid 30412 terminated in 9 ms",
                "nightly_billing",
            )
        )
        status = str(slot_status(attempts, FROZEN_NOW))
        overlap = overlap_seconds(executions(attempts), FROZEN_NOW)
        ids = {r.id for r in attempts}
        dupes = tuple(g for g in sample_duplicates() if ids & set(g.run_ids))
        got = [r for r in attempts if r.outcome != "skipped"]
        report = SlotReport(
            job_name, slot, len(got), len(attempts) - len(got),
            tuple((r.instance, r.outcome) for r in attempts), status, overlap,  # type: ignore[arg-type]
        )  # fmt: skip
        story = SlotStory(
            job=job_name,
            slot=slot,
            ledger="billing",
            taken_at=FROZEN_NOW,
            since=since,
            until=until,
            attempts=tuple(attempts),
            outputs=tuple((r.id, f"billed 120 tenants for {slot:%Y-%m}\n") for r in got if r.id),
            holders=tuple(journal),
            audit=tuple(sorted((e for e in audit if since <= e.at <= until), key=lambda e: e.at)),
            alerts=tuple(alerts([report])),
            duplicates=dupes,
            status=status,
            overlap=overlap,
        )
        return replace(story, verdict=verdict(story, job_name), events=tuple(events(story)))

    def duplicate_summary(self, job: str) -> DuplicateSummary:
        from lockconsole.backends.duplicates import DuplicateSummary

        return DuplicateSummary(groups=120, surplus_rows=240, has_unique_key=False)

    def duplicates(self, job: str, *, page: int = 0, page_size: int = 50) -> DuplicatePage:
        from lockconsole.backends.duplicates import DuplicatePage

        groups = sample_duplicates()
        chunk = groups[page * page_size : (page + 1) * page_size]
        return DuplicatePage(tuple(chunk), (page + 1) * page_size < len(groups))

    def duplicate_rows(self, job: str, key: tuple[object, ...]) -> list[dict[str, Any]]:
        tenant, period = key
        return [
            {
                "id": 5000 + i,
                "tenant_id": tenant,
                "period": period,
                "amount": "49.00",
                "run_id": 801 + i,
            }
            for i in range(3)
        ]

    def duplicate_ddl(self, job: str) -> str:
        spec = self.config.job(job).idempotency or Idempotency("invoices", ("tenant_id", "period"))
        return (
            f"-- remove the 240 surplus rows of the 120 duplicated keys first\n"
            f"ALTER TABLE {spec.table} ADD CONSTRAINT {spec.table}_{'_'.join(spec.key)}_key "
            f"UNIQUE ({', '.join(spec.key)});"
        )

    def export_duplicates(self, job: str, path: str) -> int:
        import csv

        with open(path, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            writer.writerow(["id", "tenant_id", "period", "amount", "run_id"])
            rows = [r for g in sample_duplicates() for r in self.duplicate_rows(job, g.key)]
            writer.writerows([list(r.values()) for r in rows])
        return len(rows)

    def close(self) -> None:
        pass


if TYPE_CHECKING:

    def _is_a_facade(console: SampleConsole) -> ConsoleFacade:
        return console  # mypy checks that SampleConsole satisfies the protocol
