"""Which attempts of a prune batch go, and the summary kept of each slot that was not plain ok.

A slot is pruned whole or not at all: its attempts are read by (job, slot), judged together by
`verdict.slot_status` (the one rule), and deleted together, once every one of them started
before the cutoff. A slot with an attempt on the newer side (a rerun days later, an attempt
that began just after the cutoff) is kept whole until a later prune finds it all old, so no
slot is ever judged from part of its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lockconsole.backends.ledger.times import from_db
from lockconsole.model.jobs import RUN_COLUMNS, Run
from lockconsole.model.verdict import overlap_seconds, slot_status

COLUMNS = tuple(column.name for column in RUN_COLUMNS)
_TIMES = tuple(column.name for column in RUN_COLUMNS if column.type == "time")


@dataclass(frozen=True)
class SlotSummary:
    """What a pruned slot that was not plain ok looked like: a row of lockconsole_slot_summaries."""

    job: str
    slot: datetime
    status: str
    attempts: int
    instances: int
    overlap_seconds: float
    first_started_at: datetime
    last_finished_at: datetime | None
    pruned_at: datetime


@dataclass
class Verdicts:
    """A batch judged: the ids to delete, the summaries to keep, the old attempts kept back."""

    ids: list[int] = field(default_factory=list)
    summaries: list[SlotSummary] = field(default_factory=list)
    kept: int = 0  # attempts before the cutoff kept: their slot has an attempt after it


def to_run(row: Sequence[Any]) -> Run:
    """A driver row of `{run_columns}` as a Run (times aware UTC)."""
    values = dict(zip(COLUMNS, row, strict=True))
    for name in _TIMES:
        values[name] = from_db(values[name])
    return Run(**values)


def summarize(job: str, slot: datetime, runs: Sequence[Run], now: datetime) -> SlotSummary:
    """The summary of one slot from all its attempts (`now`: the server's time)."""
    ends = [r.finished_at for r in runs if r.finished_at is not None]
    return SlotSummary(
        job=job,
        slot=slot,
        status=slot_status(runs, now),
        attempts=len(runs),
        instances=len({r.instance for r in runs}),
        overlap_seconds=round(overlap_seconds(runs, now), 6),
        first_started_at=min(r.started_at for r in runs),
        last_finished_at=max(ends) if ends else None,
        pruned_at=now,
    )


def judge(
    batch: Iterable[tuple[int, str, datetime]],
    attempts: Mapping[tuple[str, datetime], Sequence[Run]],
    cutoff: datetime,
    now: datetime,
) -> Verdicts:
    """Judge each slot of `batch` ((id, job, slot) rows) from all of its `attempts`.

    A slot belongs to the batch that holds its first attempt: a later batch that meets the
    rest of it (a dry run deletes nothing) leaves it alone, so nothing is counted twice.
    """
    rows = list(batch)
    ids = {row[0] for row in rows}
    found = Verdicts()
    for job, slot in dict.fromkeys((job, slot) for _, job, slot in rows):
        runs = attempts.get((job, slot), ())
        if not runs:  # another prune took it meanwhile
            continue
        if any(r.started_at >= cutoff for r in runs):
            found.kept += sum(1 for r in runs if r.id in ids)
            continue
        if min(runs, key=lambda r: (r.started_at, r.id or 0)).id not in ids:
            continue  # judged with the batch that held its first attempt
        found.ids.extend(int(r.id) for r in runs if r.id is not None)
        summary = summarize(job, slot, runs, now)
        if summary.status != "ok":
            found.summaries.append(summary)
    return found
