"""The dashboard in the past: what it shows when its clock is set back to a moment (pure).

    Past(moment, snapshot, errors)       what the dashboard shows while it is in the past
    past_snapshot(config, moment, entries, runs, errors)   a Snapshot as of `moment`
    journal_holder(entry, moment)        a journaled holding as the holders pane shows one
    as_of(run, moment)                   a run as the ledger said it at `moment`
    parse_moment(text, zone, day)        a moment an operator typed, in the console's zone

The holders are the holder journal's (`ConsoleFacade.holders_at`): who held which lock then,
each with the interval the samplers saw it in, and "maybe" where `moment` falls between the
sample before a holding and its first sighting (or between its last sighting and the sample
that found it gone). The history is the ledger's runs that had started by `moment`; a run that
finished later is shown running, as it was then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, time, tzinfo
from typing import TYPE_CHECKING, Literal

from lockconsole.model.jobs import GOT_LOCK, Run
from lockconsole.model.slots import next_fire
from lockconsole.model.views import Holder, JobStatus, JournalEntry, Snapshot
from lockconsole.text.times import clock

if TYPE_CHECKING:
    from lockconsole.config.loader import Config

JOURNAL = "holder journal"  # the source a past holder is shown from


@dataclass(frozen=True)
class Past:
    """The dashboard's clock set back: the moment, what was read of it, and what could not be."""

    moment: datetime
    snapshot: Snapshot
    errors: tuple[tuple[str, str], ...] = ()  # (database or part, why it could not be read)
    came_from: str = ""  # what sent the dashboard there ("the story of nightly_billing …")


def seen_span(entry: JournalEntry, moment: datetime, zone: tzinfo | None) -> str:
    """The interval the samplers saw a holding in, in `zone`: 'seen 01:59:58–02:00:05'."""
    first = clock(entry.first_seen, moment, zone)
    last = clock(entry.last_seen, moment, zone) if entry.last_seen else "still held"
    return f"seen {first}–{last}"


def surely_held(entry: JournalEntry, moment: datetime) -> bool:
    """Seen holding at or around `moment` by a sample on each side (not only maybe)."""
    last = entry.last_seen
    return entry.first_seen <= moment and (last is None or moment <= last)


def journal_holder(entry: JournalEntry, moment: datetime, zone: tzinfo | None = None) -> Holder:
    """A journaled holding as the holders pane shows a holder: granted, held at least since its
    first sighting; its note says the seen-interval, and "maybe" when `moment` is in the
    sampling's uncertainty."""
    kind = entry.kind if entry.kind in ("advisory", "user_lock", "lease", "redis") else "advisory"
    key_kind: Literal["int64", "int4pair", "name"] = "name"
    if kind == "advisory":
        key_kind = "int4pair" if "," in entry.key else "int64"
    sure = surely_held(entry, moment)
    note = ("" if sure else "MAYBE held then: between two samples; ") + seen_span(
        entry, moment, zone
    )
    return Holder(
        database=entry.database,
        kind=kind,  # type: ignore[arg-type]
        key=entry.key,
        key_kind=key_kind,
        granted=True,
        source=JOURNAL,
        job=entry.job,
        mode=entry.mode,
        pid=entry.pid,
        user=entry.user,
        application_name=entry.application,
        client_addr=entry.client,
        backend_start=entry.session_start,
        held_since=entry.first_seen if sure else None,
        held_from="at_least" if sure else None,
        first_seen=entry.first_seen,
        locked_by=entry.locked_by,
        hidden=note,  # the note column: what the journal knows of this holding, and how surely
    )


def as_of(run: Run, moment: datetime) -> Run:
    """`run` as the ledger said it at `moment`: still running when it finished later."""
    if run.finished_at is None or run.finished_at <= moment:
        return run
    outcome = "acquired" if run.outcome in GOT_LOCK else run.outcome
    return replace(run, outcome=outcome, finished_at=None, exit_code=None, message=None)


def past_snapshot(
    config: Config,
    moment: datetime,
    entries: Iterable[JournalEntry],
    runs: Iterable[Run],
    errors: Sequence[tuple[str, str]] = (),
    zone: tzinfo | None = None,
) -> Snapshot:
    """What the dashboard shows at `moment`: the journal's holders, the runs started by then
    (as they were then), each job's last run and next firing as of then."""
    holders = tuple(journal_holder(e, moment, zone) for e in entries)
    then = sorted(
        (as_of(r, moment) for r in runs if r.started_at <= moment),
        key=lambda r: (r.started_at, r.id or 0),
        reverse=True,
    )
    statuses = []
    for job in config.jobs.values():
        last = next((r for r in then if r.job == job.name), None)
        success = next((r for r in then if r.job == job.name and r.outcome == "succeeded"), None)
        holder = next((h for h in holders if h.job == job.name), None)
        statuses.append(JobStatus(job, next_fire(job, moment), holder, last, None, success))
    return Snapshot(
        taken_at=moment,
        jobs=tuple(statuses),
        holders=holders,
        runs=tuple(then),
        errors=tuple(errors),
    )


_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?$")


def parse_moment(text: str, zone: tzinfo | None, day: date) -> datetime:
    """A moment as an operator types it: '02:00:03' (on `day`), '2026-11-27 02:00:03' (both in
    the console's zone), or ISO 8601 with its own offset ('2026-11-27T02:00:03Z'); aware, UTC.
    ValueError says what is accepted."""
    raw = text.strip()
    zone = zone or UTC
    found = _CLOCK.match(raw)
    try:
        if found:
            hour, minute, second, frac = found.groups()
            at = time(int(hour), int(minute), int(second or 0), int((frac or "0").ljust(6, "0")))
            value = datetime.combine(day, at)
        else:
            value = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"not a time: {raw!r} (type 02:00:03, 2026-11-27 02:00:03, or ISO 8601 with a zone)"
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return value.astimezone(UTC)
