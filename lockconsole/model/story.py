"""A slot's story told: its events in order and its verdict, from a SlotStory's facts.

Pure: the console gathers the facts (console/story.py), this says what they mean, and the CLI
and the console render the same account.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockconsole.model.jobs import GOT_LOCK
from lockconsole.model.views import JournalEntry, SlotStory, StoryEvent


def events(story: SlotStory) -> list[StoryEvent]:
    """The account, oldest first: attempts, holders, audit entries."""
    out: list[StoryEvent] = []
    for run in story.attempts:
        took = run.outcome in GOT_LOCK
        what = "acquired, started the job" if took else f"{run.outcome}: {run.message or 'held'}"
        out.append(StoryEvent(run.started_at, "attempt", run.instance, f"run {run.id}: {what}"))
        if took and run.finished_at is not None:
            code = "" if run.exit_code is None else f", exit {run.exit_code}"
            end = f"run {run.id}: {run.outcome}{code}" + (f": {run.message}" if run.message else "")
            out.append(StoryEvent(run.finished_at, "attempt", run.instance, end))
        elif took:
            out.append(
                StoryEvent(story.taken_at, "attempt", run.instance, f"run {run.id}: still running")
            )
    for h in story.holders:
        who = holder_name(h)
        seen = f"held {h.key} (seen {_span(h.first_seen, h.last_seen)})"
        out.append(StoryEvent(h.first_seen, "holder", who, seen))
        if h.gone_by is not None:
            out.append(StoryEvent(h.gone_by, "holder", who, f"gone from {h.key}"))
    for e in story.audit:
        said = f"{e.action} {e.target}: {e.result}" + (f" ({e.message})" if e.message else "")
        out.append(StoryEvent(e.at, "audit", f"{e.os_user}@{e.host}", said))
    out.sort(key=lambda ev: ev.at)
    return out


def holder_name(h: JournalEntry) -> str:
    """Who a journaled holder was: its application (or lease owner), pid and client."""
    name = h.application or h.locked_by or h.kind
    pid = f" pid {h.pid}" if h.pid is not None else ""
    client = f" from {h.client}" if h.client else ""
    return f"{name}{pid}{client}"


def _span(first: datetime, last: datetime | None) -> str:
    fmt = "%H:%M:%S"
    return f"{first.strftime(fmt)}–{last.strftime(fmt)}" if last else f"{first.strftime(fmt)}–"


def verdict(story: SlotStory, job: str) -> str:
    """The short verdict, with why."""
    got = [r for r in story.attempts if r.outcome in GOT_LOCK]
    skipped = [r for r in story.attempts if r.outcome in ("skipped", "paused")]
    names = ", ".join(dict.fromkeys(r.instance for r in got))
    foreign = [h for h in story.holders if not (h.application or "").startswith("lockconsole")]
    why_foreign = ""
    if foreign:
        why_foreign = "; the lock was also held outside lockconsole by " + ", ".join(
            f"{holder_name(h)} (seen {_span(h.first_seen, h.last_seen)})" for h in foreign
        )
    dupes = ""
    if story.duplicates:
        surplus = sum(g.count - 1 for g in story.duplicates)
        dupes = (
            f"; {len(story.duplicates)} duplicated keys ({surplus} surplus rows) carry its run ids"
        )
    status = story.status
    if status == "ok":
        return f"exactly once: {names} ran it, {len(skipped)} skipped{why_foreign}{dupes}"
    if status == "retried":
        return f"retried: ran on {names} one after another, the last succeeded{why_foreign}{dupes}"
    if status == "double_run":
        overlap = (
            f", overlapping {story.overlap:.1f} s" if story.overlap > 0 else ", one after another"
        )
        return f"double run: {len(got)} executions on {names}{overlap}{why_foreign}{dupes}"
    if status == "missed":
        if not story.attempts:
            why = "no instance attempted it (no scheduler fired, or none could reach the ledger)"
        else:
            why = f"every attempt skipped ({len(skipped)}): the lock was held"
        return f"missed: {why}{why_foreign}"
    if status == "paused":
        return f"paused: every attempt found {job} paused"
    if status == "running":
        return f"running on {names}"
    if status in ("failed", "lock_lost"):
        return f"{status}: ran on {names}, none succeeded{why_foreign}{dupes}"
    return f"not judged: {status} (not due yet, or a manual run){why_foreign}"


def story_dict(story: SlotStory) -> dict[str, Any]:
    """The story as JSON keeps it: every value exact, times as ISO 8601 text."""
    from dataclasses import asdict

    data = asdict(story)
    data["unknown"] = [{"part": p, "why": w} for p, w in story.unknown]
    data["outputs"] = [{"run_id": i, "output": o} for i, o in story.outputs]
    return _plain(data)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    return value
