"""The story of a slot: one chronological account of what happened to one job in one slot.

Gathered from every source the console has, each read on its own so that one that cannot be
read is named as unknown and hides nothing else:

- the ledger: every instance's attempt (took the lock or skipped, when, how it ended, exit code)
  and the output tail each left;
- the holder journal: the holders seen around the slot, foreign ones included, with the
  uncertainty of sampling;
- the audit: force-releases, triggers, pauses and requests of the job in that window;
- the alerts the slot raises, by the one rule (`model/verdict`);
- the idempotency table: duplicate keys that carry the slot's run ids (with a run_column).

It ends with a verdict: exactly once, retried, double run with its overlap, missed, and why.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from lockconsole.backends.ledger import journal as journal_store
from lockconsole.backends.ledger.outputs import output_of
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config
from lockconsole.console.journal import journal_home
from lockconsole.console.snapshot.reports import alerts as slot_alerts
from lockconsole.model.jobs import GOT_LOCK, Job
from lockconsole.model.slots import is_firing
from lockconsole.model.story import events, verdict
from lockconsole.model.verdict import executions, overlap_seconds, slot_status
from lockconsole.model.views import (
    AuditEntry,
    DuplicateGroup,
    JournalEntry,
    SlotReport,
    SlotStory,
)

MARGIN = timedelta(minutes=2)  # how far around the slot's attempts holders and audit are read


@dataclass
class StorySources:
    """Where a story reads each part (the facade's kept connections)."""

    config: Config
    ledger_named: Callable[[str], Ledger]
    audit: Callable[[str, datetime], tuple[list[AuditEntry], list[tuple[str, str]]]]
    duplicates: Callable[[Job, list[int]], list[DuplicateGroup]]
    grace: timedelta


def tell(sources: StorySources, job: Job, slot: datetime) -> SlotStory:
    """The story of `job`'s `slot` (an aware datetime)."""
    config = sources.config
    ledger_db = config.ledger_for(job)
    ledger = sources.ledger_named(ledger_db.name)
    now = ledger.now()  # the ledger server's clock: every judgement of the story uses it
    unknown: list[tuple[str, str]] = []
    attempts = sorted(ledger.slot_runs(job.name, slot), key=lambda r: (r.started_at, r.id or 0))
    ends = [r.finished_at or r.started_at for r in attempts]
    since = min([slot, *(r.started_at for r in attempts)]) - MARGIN
    until = max([slot, *ends]) + MARGIN
    outputs: list[tuple[int, str]] = []
    for run in attempts:
        if run.id is not None and run.outcome in GOT_LOCK:
            try:
                kept = output_of(ledger, run.id)
            except Exception as exc:
                unknown.append((f"output of run {run.id}", _said(exc)))
                continue
            if kept is not None and kept.output:
                outputs.append((run.id, kept.output))
    holders: list[JournalEntry] = []
    home = journal_home(config, job.database)
    if home is not None:
        try:
            engine = sources.ledger_named(home).sa_engine()
            if journal_store.has_journal(engine):
                holders = journal_store.seen_between(engine, since, until, job=job.name)
            else:
                unknown.append(("holder journal", f"no holder journal in {home} yet"))
        except Exception as exc:
            unknown.append(("holder journal", _said(exc)))
    try:
        entries, errors = sources.audit(job.name, since)
        audit = [e for e in entries if since <= e.at <= until]
        unknown.extend((f"audit of {name}", why) for name, why in errors)
    except Exception as exc:
        audit = []
        unknown.append(("audit", _said(exc)))
    duplicates: list[DuplicateGroup] = []
    run_ids = [r.id for r in attempts if r.id is not None and r.outcome in GOT_LOCK]
    if job.idempotency is not None and job.idempotency.run_column and run_ids:
        try:
            duplicates = sources.duplicates(job, run_ids)
        except Exception as exc:
            unknown.append(("idempotency table", _said(exc)))
    due = is_firing(job, slot) and now >= slot + sources.grace
    status = str(slot_status(attempts, now, due=due))
    overlap = overlap_seconds(executions(attempts), now)
    report = SlotReport(
        job.name,
        slot,
        sum(1 for r in attempts if r.outcome in GOT_LOCK),
        sum(1 for r in attempts if r.outcome not in GOT_LOCK),
        tuple((r.instance, r.outcome) for r in attempts),
        status,  # type: ignore[arg-type]
        overlap,
    )
    raised = tuple(slot_alerts([report])) if status != "skipped" else ()
    story = SlotStory(
        job=job.name,
        slot=slot,
        ledger=ledger_db.name,
        taken_at=now,
        since=since,
        until=until,
        attempts=tuple(attempts),
        outputs=tuple(outputs),
        holders=tuple(holders),
        audit=tuple(sorted(audit, key=lambda e: (e.at, e.id))),
        alerts=raised,
        duplicates=tuple(duplicates),
        status=status,
        overlap=overlap,
        unknown=tuple(unknown),
    )
    return _finished(story, job)


def _finished(story: SlotStory, job: Job) -> SlotStory:
    from dataclasses import replace

    return replace(story, verdict=verdict(story, job.name), events=tuple(events(story)))


def _said(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
