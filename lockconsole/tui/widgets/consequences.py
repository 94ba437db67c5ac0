"""What an action will cause, said in its dialog before the operator confirms (pure text).

    release_consequences(holder, holders, zone)  who gets the lock next, and every other lock
                                                 the same session holds (all freed with it)
    trigger_warnings(job, snapshot, slot, now)   the job holds its lock right now; the chosen
                                                 slot already succeeded

Read from the snapshot on screen (the last refresh); each line is data (shown literally by the
dialog).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo

from lockconsole.model.jobs import Job
from lockconsole.model.views import Holder, Snapshot
from lockconsole.text.times import age, stamp

MOST_LISTED = 8  # other locks of the session listed by name; the rest are counted


def _who(h: Holder) -> str:
    who = h.instance or h.application_name or h.locked_by or h.user
    pid = f"pid {h.pid}" if h.pid is not None else h.kind
    return f"{pid} ({who})" if who else pid


def _held_for(h: Holder, now: datetime) -> str:
    if h.held_since is None:
        return ""
    bound = "at least " if h.held_from == "at_least" else ""
    return f" for {bound}{age(h.held_since, now)}"


def waiters_of(holder: Holder, holders: Iterable[Holder]) -> list[Holder]:
    """The sessions waiting for the holder's lock, the longest waiting first."""
    far = datetime.max.replace(tzinfo=holder.held_since.tzinfo if holder.held_since else None)
    waiting = [
        h
        for h in holders
        if not h.granted
        and h.database == holder.database
        and h.kind == holder.kind
        and h.key == holder.key
    ]
    return sorted(waiting, key=lambda h: (h.waiting_since or far, h.pid or 0))


def also_held(holder: Holder, holders: Iterable[Holder]) -> list[Holder]:
    """The other locks the holder's session holds: ending the session frees them too."""
    if holder.pid is None or holder.kind not in ("advisory", "user_lock"):
        return []
    return [
        h
        for h in holders
        if h.granted
        and h.pid == holder.pid
        and h.database == holder.database
        and h.kind == holder.kind
        and h.key != holder.key
    ]


def release_consequences(
    holder: Holder, holders: Sequence[Holder], zone: tzinfo | None = None
) -> list[str]:
    """What releasing `holder` causes, one line each (nothing for a waiter)."""
    if not holder.granted:
        return []
    lines: list[str] = []
    waiting = waiters_of(holder, holders)
    if waiting:
        first = waiting[0]
        since = (
            f", waiting since {stamp(first.waiting_since, tz=zone)}" if first.waiting_since else ""
        )
        order = (
            "gets the lock next"
            if holder.kind == "advisory"
            else "is waiting for it (the server chooses which waiter gets it)"
        )
        more = f"; {len(waiting) - 1} more wait behind it" if len(waiting) > 1 else ""
        lines.append(f"→ {_who(first)} {order}{since}{more}")
    elif holder.kind in ("advisory", "user_lock"):
        lines.append("→ no session waits for this lock: it becomes free")
    others = also_held(holder, holders)
    if others:
        names = [f"{h.key} ({h.job})" if h.job else h.key for h in others[:MOST_LISTED]]
        rest = f" and {len(others) - MOST_LISTED} more" if len(others) > MOST_LISTED else ""
        lines.append(
            f"⚠ the same session holds {len(others)} other lock(s), all freed with it: "
            + ", ".join(names)
            + rest
        )
    return lines


def trigger_warnings(
    job: Job,
    snapshot: Snapshot | None,
    slot: datetime | None,
    now: datetime,
    zone: tzinfo | None = None,
) -> list[str]:
    """Why running `job` now may not do what the operator expects, one line each."""
    if snapshot is None:
        return []
    lines: list[str] = []
    held = next((h for h in snapshot.holders if h.job == job.name and h.granted), None)
    if held is not None:
        lines.append(
            f"⚠ {job.name} holds its lock right now: {_who(held)}{_held_for(held, now)}. "
            "A run started now is skipped while that lock is held."
        )
    if slot is not None:
        done = [
            r
            for r in snapshot.runs
            if r.job == job.name and r.slot == slot and r.outcome == "succeeded"
        ]
        if done:
            r = done[0]
            what = (
                "the fleet skips a slot that already ran (once per slot): "
                "`lockconsole request --slot ... --force` reruns it anyway"
                if job.once_per_slot
                else "running it again runs it twice"
            )
            at = stamp(slot, tz=zone)
            lines.append(f"⚠ slot {at} already succeeded on {r.instance} (run {r.id}): {what}")
    return lines
