"""A slot's status from its attempts: the one rule, used by the reports (check, metrics), the
history pane and the timeline alike.

    ok          one attempt took the lock and succeeded
    running     the attempt that holds it has not finished
    retried     attempts ran one after another, the earlier ones failed or lost the lock, the
                last succeeded: the retry a run-once job is allowed (not an alert)
    double_run  two executions overlapped in time, or one ran after another had succeeded
    failed / lock_lost   how the last (or only) execution ended, none succeeded
    missed      no attempt took the lock and the slot was due (every instance skipped, or none
                attempted it); one not judged yet (not due, or a manual run) is "skipped"
    paused      no attempt ran because the job was paused
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, Protocol

from lockconsole.model.jobs import GOT_LOCK, Run
from lockconsole.model.views import SlotStatus

_ONE_EXECUTION: dict[str, SlotStatus] = {
    "acquired": "running",
    "succeeded": "ok",
    "failed": "failed",
    "lock_lost": "lock_lost",
}


class Execution(Protocol):
    """What the rule reads of an attempt that took the lock (a Run, or a row summarised by the
    ledger's own aggregation)."""

    @property
    def instance(self) -> str: ...
    @property
    def outcome(self) -> str: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def finished_at(self) -> datetime | None: ...
    @property
    def id(self) -> int | None: ...


@dataclass(frozen=True)
class Span:
    """One execution as the ledger's per-slot aggregation returns it."""

    instance: str
    outcome: str
    started_at: datetime
    finished_at: datetime | None
    id: int | None


@dataclass(frozen=True)
class SlotTally:
    """Everything the rule needs of one slot: its executions (every one), how many attempts
    skipped or found the job paused, and who skipped (where the ledger was read per attempt)."""

    job: str
    slot: datetime
    manual: bool
    executions: tuple[Execution, ...]  # in start order
    skipped: int = 0
    paused: int = 0
    earliest: datetime | None = None  # the first attempt's start
    skipped_by: tuple[str, ...] = ()  # instances that skipped, in start order, when read


def _start_order(run: Execution) -> tuple[datetime, int]:
    return run.started_at, run.id or 0


def executions(runs: Iterable[Run]) -> list[Run]:
    """The attempts that took the lock, in start order."""
    return sorted((r for r in runs if r.outcome in GOT_LOCK), key=_start_order)


def tally(job: str, slot: datetime, runs: Iterable[Run]) -> SlotTally:
    """The tally of one slot from every one of its attempts."""
    runs = sorted(runs, key=_start_order)
    return SlotTally(
        job=job,
        slot=slot,
        manual=any(r.trigger == "manual" for r in runs),
        executions=tuple(r for r in runs if r.outcome in GOT_LOCK),
        skipped=sum(r.outcome == "skipped" for r in runs),
        paused=sum(r.outcome == "paused" for r in runs),
        earliest=runs[0].started_at if runs else None,
        skipped_by=tuple(r.instance for r in runs if r.outcome == "skipped"),
    )


def overlap_seconds(runs: Iterable[Execution], now: datetime) -> float:
    """The longest time two executions among `runs` ran at once.

    An execution spans its attempt's started_at to finished_at (now while still "acquired";
    a closed attempt without an end counts as an instant).
    """
    spans = sorted(
        (r.started_at, r.finished_at or (now if r.outcome == "acquired" else r.started_at))
        for r in runs
        if r.outcome in GOT_LOCK
    )
    longest, latest_end = 0.0, None
    for start, end in spans:
        if latest_end is not None:
            longest = max(longest, (min(end, latest_end) - start).total_seconds())
        latest_end = end if latest_end is None else max(latest_end, end)
    return longest


def decide(
    got: Sequence[Execution], now: datetime, *, paused: bool = False, due: bool = True
) -> SlotStatus | Literal["skipped"]:
    """The rule itself (see the module's docstring): from a slot's executions in start order,
    and whether an attempt found the job paused."""
    if not got:
        if paused:
            return "paused"
        return "missed" if due else "skipped"
    if len(got) == 1:
        return _ONE_EXECUTION[got[0].outcome]
    ran_again = any(r.outcome == "succeeded" for r in got[:-1])  # after a success: twice
    if ran_again or overlap_seconds(got, now) > 0:
        return "double_run"
    last = got[-1].outcome
    return "retried" if last == "succeeded" else _ONE_EXECUTION[last]


def slot_status(
    runs: Iterable[Run], now: datetime, *, due: bool = True
) -> SlotStatus | Literal["skipped"]:
    """The status of one slot from all its attempts (see the module's docstring)."""
    runs = list(runs)
    return decide(executions(runs), now, paused=any(r.outcome == "paused" for r in runs), due=due)


def tally_status(
    slot: SlotTally, now: datetime, *, due: bool = True
) -> SlotStatus | Literal["skipped"]:
    """The status of one tallied slot: the same rule."""
    return decide(slot.executions, now, paused=slot.paused > 0, due=due)
