"""Which attempts of a prune batch go, and the summary kept of each slot that was not plain ok.

A slot is pruned whole or not at all: its attempts are read by (job, slot), judged together by
`verdict.slot_status` (the one rule), and deleted together, once every one of them started
before the cutoff. A slot with an attempt on the newer side (a rerun days later, an attempt
that began just after the cutoff) is kept whole until a later prune finds it all old, so no
slot is ever judged from part of its attempts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any

from lockconsole.model.construct import construct
from lockconsole.model.jobs import Run
from lockconsole.model.verdict import overlap_seconds, slot_status

# the columns a slot's verdict reads (select_prune_batch.sql); a Run's others are placeholders
COLUMNS = ("id", "job", "slot", "instance", "outcome", "started_at", "finished_at")
_BLANK = {f.name: f.default for f in fields(Run)} | {"host": "", "pid": 0, "trigger": "scheduled"}


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


def to_run(values: dict[str, Any]) -> Run:
    """A Run of the COLUMNS in `values` (times aware), for judging: built without __init__."""
    return construct(Run, _BLANK | values)


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
    slots: Iterable[tuple[str, Any]],
    attempts: Mapping[tuple[str, Any], Sequence[Run]],
    ids: Set[int],
    cutoff: datetime,
    now: datetime,
) -> Verdicts:
    """Judge each (job, slot) of a batch (`ids`: its attempts) from all of its `attempts`.

    A slot belongs to the batch that holds its first attempt: a later batch that meets the
    rest of it (a dry run deletes nothing) leaves it alone, so nothing is counted twice.
    """
    found = Verdicts()
    for key in dict.fromkeys(slots):
        runs = attempts.get(key, ())
        if not runs:  # another prune took it meanwhile
            continue
        if any(r.started_at >= cutoff for r in runs):
            found.kept += sum(1 for r in runs if r.id in ids)
            continue
        if min(runs, key=lambda r: (r.started_at, r.id or 0)).id not in ids:
            continue  # judged with the batch that held its first attempt
        found.ids.extend(int(r.id) for r in runs if r.id is not None)
        if slot_status(runs, now) != "ok":
            found.summaries.append(summarize(key[0], runs[0].slot, runs, now))
    return found
