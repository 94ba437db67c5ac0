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

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

from lockconsole.model.jobs import Run
from lockconsole.model.views import SlotStatus

# the outcomes of an attempt that held the slot's lock: it executed (or began to)
GOT_LOCK = frozenset({"acquired", "succeeded", "failed", "lock_lost"})
_ONE_EXECUTION: dict[str, SlotStatus] = {
    "acquired": "running",
    "succeeded": "ok",
    "failed": "failed",
    "lock_lost": "lock_lost",
}


def executions(runs: Iterable[Run]) -> list[Run]:
    """The attempts that took the lock, in start order."""
    return sorted(
        (r for r in runs if r.outcome in GOT_LOCK), key=lambda r: (r.started_at, r.id or 0)
    )


def overlap_seconds(runs: Iterable[Run], now: datetime) -> float:
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


def slot_status(
    runs: Iterable[Run], now: datetime, *, due: bool = True
) -> SlotStatus | Literal["skipped"]:
    """The status of one slot from all its attempts (see the module's docstring)."""
    runs = list(runs)
    got = executions(runs)
    if not got:
        if any(r.outcome == "paused" for r in runs):
            return "paused"
        return "missed" if due else "skipped"
    if len(got) == 1:
        return _ONE_EXECUTION[got[0].outcome]
    ran_again = any(r.outcome == "succeeded" for r in got[:-1])  # after a success: twice
    if ran_again or overlap_seconds(got, now) > 0:
        return "double_run"
    last = got[-1].outcome
    return "retried" if last == "succeeded" else _ONE_EXECUTION[last]
