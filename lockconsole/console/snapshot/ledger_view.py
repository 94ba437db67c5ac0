"""What one snapshot reads of one ledger: the slots judged by the ledger's own aggregation over
the whole lookback, and a page of the newest attempts, read apart so that the page's limit never
changes a verdict.

The ledger groups its rows per (job, slot) on the (job, slot) index and returns one row per slot
with its counts and, for the usual slot with one execution, that execution's columns. Only the
slots that need more are read per attempt: those with two or more executions (the rule compares
them, every one) and those nobody ran (the alert names who skipped; newest first, at most
DETAILED). The
cost therefore grows with the lookback and the number of jobs, not with the ledger's size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockconsole.backends.ledger import reads
from lockconsole.model.construct import construct
from lockconsole.model.jobs import GOT_LOCK, Run
from lockconsole.model.verdict import Execution, SlotTally, Span

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger

DETAILED = 2000  # slots nobody ran read per attempt at most, newest first (the rest: counts)
CHUNK = 500  # slots per statement when reading them per attempt
_SPAN = ("instance", "outcome", "started_at", "finished_at", "id")  # verdict.Span's fields


@dataclass
class LedgerView:
    """One ledger as a snapshot sees it."""

    runs: list[Run] = field(default_factory=list)  # the newest attempts, newest first (a page)
    tallies: list[SlotTally] = field(default_factory=list)  # every slot in the lookback
    first_seen: dict[str, datetime] = field(default_factory=dict)  # job -> its first slot
    newest: dict[str, Run] = field(default_factory=dict)  # job -> its newest attempt
    last_success: dict[str, Run] = field(default_factory=dict)  # job -> newest success
    attempts: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (job, outcome,
    # instance) -> attempts in the lookback


def merged(views: Iterable[LedgerView]) -> LedgerView:
    """The views of every ledger as one. Two database names for one database read the same
    ledger: each row counts once. Each job's newest attempt is among the runs, however many
    attempts of other jobs are newer."""
    views = list(views)
    unique = {
        (r.id, r.job, r.instance, r.started_at): r
        for v in views
        for r in (*v.runs, *v.newest.values())
    }
    tallies = {(t.job, t.slot, t.manual): t for v in views for t in v.tallies}
    return LedgerView(
        runs=list(unique.values()),
        tallies=list(tallies.values()),
        first_seen={job: at for v in views for job, at in v.first_seen.items()},
        newest={job: r for v in views for job, r in v.newest.items()},
        last_success={job: r for v in views for job, r in v.last_success.items()},
        attempts={k: n for v in views for k, n in v.attempts.items()},
    )


def read_view(ledger: Ledger, jobs: list[str], *, since: datetime, limit: int) -> LedgerView:
    """The ledger's page of attempts since `since` and the tallies of `jobs`' slots since then."""
    view = LedgerView(runs=ledger.runs(since=since, limit=limit))
    if not jobs:
        return view
    dialect = ledger.dialect
    rows = ledger.rows(lambda _have: reads.slot_tallies(jobs, since, dialect))
    view.tallies = _tallies(ledger, rows, dialect)
    counted = ledger.rows(lambda _have: reads.attempt_counts(jobs, since, dialect))
    view.attempts = {(r["job"], r["outcome"], r["instance"]): int(r["attempts"]) for r in counted}
    newest = ledger.rows(lambda have: reads.newest_of_each(have, jobs))
    view.newest = {row["job"]: Run(**row) for row in newest}
    done = ledger.rows(lambda have: reads.newest_of_each(have, jobs, "succeeded"))
    view.last_success = {row["job"]: Run(**row) for row in done}
    [first] = ledger.rows(lambda _have: reads.first_slots(jobs)) or [{}]
    view.first_seen = {
        job: first[f"j{i}"] for i, job in enumerate(jobs) if first.get(f"j{i}") is not None
    }
    return view


def _tallies(ledger: Ledger, rows: list[dict[str, Any]], dialect: str) -> list[SlotTally]:
    """SlotTallies from the aggregated rows, with the slots that need it read per attempt."""
    key = tuple[str, datetime, bool]
    several = [r for r in rows if int(r["executed"]) >= 2]  # always: the rule compares them
    nobody = [r for r in rows if int(r["executed"]) == 0 and not int(r["paused"])]
    nobody.sort(key=lambda r: r["slot"], reverse=True)
    attempts: dict[key, list[Run]] = defaultdict(list)
    by_job: dict[str, list[datetime]] = defaultdict(list)
    for r in [*several, *nobody[:DETAILED]]:
        by_job[r["job"]].append(r["slot"])
    for job, slots in sorted(by_job.items()):
        unique = sorted(set(slots))
        for at in range(0, len(unique), CHUNK):
            chunk = unique[at : at + CHUNK]
            for row in ledger.rows(
                lambda have, c=chunk, j=job: reads.of_slots(have, j, c, dialect)
            ):
                run = Run(**row)
                attempts[(run.job, run.slot, run.trigger == "manual")].append(run)
    out = []
    for r in rows:  # tens of thousands in a long lookback: built without __init__
        group: key = (r["job"], r["slot"], bool(r["manual"]))
        read = attempts.get(group)
        if read is not None:
            executions: tuple[Execution, ...] = tuple(x for x in read if x.outcome in GOT_LOCK)
            skipped_by = tuple(x.instance for x in read if x.outcome == "skipped")
        elif int(r["executed"]) == 1:
            span = {name: r[name] for name in _SPAN}
            executions, skipped_by = (construct(Span, span),), ()
        else:
            executions, skipped_by = (), ()
        out.append(
            construct(
                SlotTally,
                {
                    "job": group[0],
                    "slot": group[1],
                    "manual": group[2],
                    "executions": executions,
                    "skipped": int(r["skipped"]),
                    "paused": int(r["paused"]),
                    "earliest": r["earliest"],
                    "skipped_by": skipped_by,
                },
            )
        )
    return out
