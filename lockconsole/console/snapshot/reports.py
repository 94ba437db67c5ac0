"""Slot reports and alerts from the run ledger: pure functions, no database access.

A slot report says what happened to one job in one slot across every instance: how many
attempts got the lock (more than one is a double run), how many skipped, and how it ended.
A scheduled firing in the lookback window that is past its grace period with no attempt that
got the lock is a missed slot, counted only from when the job first appears in the ledger
(or from `first_seen`). Manual runs have their own slots: they are reported, but they never
make a scheduled slot missed or double. A slot every instance found paused (or a firing
while its job is paused) is paused, not missed, and raises no alert.

    reports = slot_reports(jobs, runs, now=utcnow(), lookback=timedelta(days=1),
                           grace=timedelta(minutes=5))
    for alert in alerts(reports, holders, {"nightly_billing": (120, 240)}, jobs=jobs): ...
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Protocol
from zoneinfo import ZoneInfo

from lockconsole.model import cron
from lockconsole.model.construct import construct
from lockconsole.model.jobs import GOT_LOCK, Job, Pause, Run
from lockconsole.model.slots import repeats_wall_time
from lockconsole.model.verdict import SlotTally, overlap_seconds, tally, tally_status
from lockconsole.model.views import Alert, AlertKind, Holder, SlotReport, SlotStatus

# the slot statuses that are alerts, and the alert each one is ("retried" is not one)
ALERT_STATUSES: dict[SlotStatus, AlertKind] = {
    "double_run": "double_run",
    "missed": "missed",
    "lock_lost": "lock_lost",
    "failed": "failed",
}
MAX_MISSED_PER_JOB = 1000  # newest missed firings listed per job (an every-second job)
MAX_FIRINGS = 1_000_000  # firings of one job looked at in the lookback (a year of minutes: 525,600)


class Summary(Protocol):
    """What alerts() reads of duplicates.DuplicateSummary."""

    @property
    def groups(self) -> int: ...
    @property
    def surplus_rows(self) -> int: ...


DuplicateCount = int | tuple[int, int] | Summary  # groups, (groups, surplus rows) or a summary


def _report(tallied: SlotTally, now: datetime) -> SlotReport:
    status = tally_status(tallied, now)
    assert status != "skipped"  # only a manual slot is told "skipped"
    got = tallied.executions
    outcomes = tuple((r.instance, r.outcome) for r in got)
    if tallied.skipped_by:
        outcomes += tuple((instance, "skipped") for instance in tallied.skipped_by)
    # built without __init__: a lookback of per-minute jobs is tens of thousands of slots
    return construct(
        SlotReport,
        {
            "job": tallied.job,
            "slot": tallied.slot,
            "acquired": len(got),
            "skipped": tallied.skipped,
            "outcomes": outcomes,
            "status": status,
            "overlap": overlap_seconds(got, now) if len(got) > 1 else 0.0,
        },
    )


def firings(job: Job, start: datetime, end: datetime, limit: int) -> Iterator[datetime]:
    """The job's firings in [start, end] (UTC), newest first, at most `limit` of them."""
    if not job.schedule or end < start:
        return
    plain = cron.parse(job.schedule, job.timezone)
    if plain is not None:  # every minute of a long lookback, without croniter's cost
        yield from islice(plain.newest_first(start, end), limit)
        return
    from croniter import croniter

    tz = ZoneInfo(job.timezone)
    it = croniter(job.schedule, (end + timedelta(microseconds=1)).astimezone(tz))
    for _ in range(limit):
        fire = it.get_prev(datetime).astimezone(UTC)
        if fire < start:
            return
        if fire <= end and not repeats_wall_time(job.schedule, job.timezone, fire):
            yield fire


def slot_reports(
    jobs: Iterable[Job],
    runs: Iterable[Run],
    *,
    now: datetime,
    lookback: timedelta,
    grace: timedelta,
    first_seen: Mapping[str, datetime] | None = None,
    pauses: Mapping[str, Pause] | None = None,
) -> list[SlotReport]:
    """Every slot in the lookback window (plus slots still running), newest first, from every
    attempt of those slots (see judge_slots)."""
    groups: dict[tuple[str, datetime, bool], list[Run]] = defaultdict(list)
    for run in runs:
        groups[(run.job, run.slot, run.trigger == "manual")].append(run)
    tallies = [tally(job, slot, group) for (job, slot, _), group in groups.items()]
    return judge_slots(
        jobs, tallies, now=now, lookback=lookback, grace=grace, first_seen=first_seen,
        pauses=pauses,
    )  # fmt: skip


def judge_slots(
    jobs: Iterable[Job],
    tallies: Iterable[SlotTally],
    *,
    now: datetime,
    lookback: timedelta,
    grace: timedelta,
    first_seen: Mapping[str, datetime] | None = None,
    pauses: Mapping[str, Pause] | None = None,
) -> list[SlotReport]:
    """Every slot in the lookback window (plus slots still running), newest first.

    `tallies` are the slots the ledger holds (each with all of its attempts); a firing of the
    schedule with no tally is missed, counted from `first_seen` (the job's first slot in the
    ledger) or else from its earliest tally. A firing no instance attempted while its job was
    paused (`pauses`: the pauses in force) is reported paused, not missed.
    """
    window_start = now - lookback
    earliest: dict[str, datetime] = {}
    reports: list[SlotReport] = []
    covered: set[tuple[str, datetime]] = set()
    for tallied in tallies:
        job_name, slot, manual = tallied.job, tallied.slot, tallied.manual
        seen = min(slot, tallied.earliest or slot)
        if job_name not in earliest or seen < earliest[job_name]:
            earliest[job_name] = seen
        report = _report(tallied, now)
        if not manual:
            covered.add((job_name, slot))
        if report.status == "running" or (
            slot >= window_start
            # a slot every instance skipped is missed once due; a skipped manual run is not
            and (report.status != "missed" or (not manual and slot + grace <= now))
        ):
            reports.append(report)
    for job in jobs:
        start = (first_seen or {}).get(job.name, earliest.get(job.name))
        if start is None:
            continue
        start = max(start, window_start)
        missed = 0
        for fire in firings(job, start, now - grace, MAX_FIRINGS):
            if (job.name, fire) not in covered:
                missed += 1
                if missed > MAX_MISSED_PER_JOB:
                    break
                pause = (pauses or {}).get(job.name)
                paused = pause is not None and pause.covers(fire)
                status = "paused" if paused else "missed"
                reports.append(SlotReport(job.name, fire, 0, 0, (), status))  # type: ignore[arg-type]
    reports.sort(key=lambda r: (r.slot, r.job), reverse=True)
    return reports


# -- alerts -----------------------------------------------------------------------------------


def format_slot(slot: datetime) -> str:
    """A slot as an operator reads it: 2026-11-29 02:00:00 UTC (the one time format)."""
    from lockconsole.text.times import stamp

    return stamp(slot)


def _slot_message(report: SlotReport) -> str:
    where = f"{report.job} {format_slot(report.slot)}"
    got = [(i, o) for i, o in report.outcomes if o in GOT_LOCK]
    if report.status == "double_run":
        names = ", ".join(i if o == "succeeded" else f"{i} ({o})" for i, o in got)
        distinct = len({i for i, _ in got})
        if distinct == len(got):
            return f"{where} ran on {len(got)} instances: {names}"
        return f"{where} ran {len(got)} times on {distinct} instance(s): {names}"
    if report.status == "missed":
        if not report.outcomes:
            return f"{where} did not run: no instance attempted it"
        skipped = ", ".join(i for i, _ in report.outcomes)
        return f"{where} did not run: every instance skipped it ({skipped})"
    instance = got[0][0] if got else "?"
    if report.status == "lock_lost":
        return f"{where} lost its lock on {instance} while the job ran"
    return f"{where} failed on {instance}"


def _length(seconds: float) -> str:
    """An overlap's length, in the one duration format."""
    from lockconsole.text.times import span

    return span(timedelta(seconds=seconds))


def _holder_subject(holder: Holder) -> str:
    """Which lock and which session: the same while the holder stays stale."""
    what = holder.job or f"unmapped {holder.kind} key {holder.key}"
    who = f"pid {holder.pid}" if holder.pid is not None else f"{holder.locked_by or '?'}"
    if holder.instance:
        who += f" ({holder.instance})"
    elif holder.application_name:
        who += f" ({holder.application_name})"
    return f"{what} on {holder.database}: lock held by {who}"


def _holder_message(holder: Holder) -> str:
    return f"{_holder_subject(holder)} looks stale: {holder.stale}"


def _counts(count: DuplicateCount) -> tuple[int, int | None]:
    """(duplicate groups, surplus rows or None) of any DuplicateCount."""
    if isinstance(count, int):
        return count, None
    if isinstance(count, tuple):
        return count
    return count.groups, count.surplus_rows


def _duplicates_message(job: str, count: DuplicateCount, jobs: Mapping[str, Job]) -> str:
    groups, surplus = _counts(count)
    spec = jobs[job].idempotency if job in jobs else None
    if spec is not None:
        head = f"{spec.table} has {groups} duplicate ({', '.join(spec.key)}) groups"
    else:
        head = f"{job}'s idempotency table has {groups} duplicate key groups"
    return head if surplus is None else f"{head}, {surplus} surplus rows"


def alerts(
    reports: Iterable[SlotReport],
    holders: Iterable[Holder] = (),
    duplicates: Mapping[str, DuplicateCount] | None = None,
    *,
    jobs: Iterable[Job] = (),
) -> list[Alert]:
    """One alert per bad slot, per stale holder and per job with duplicate keys."""
    out = [
        Alert(kind=ALERT_STATUSES[r.status], job=r.job, message=_slot_message(r), slot=r.slot)
        for r in reports
        if r.status in ALERT_STATUSES
    ]
    out += [
        Alert(
            "overlap",
            r.job,
            f"{r.job} {format_slot(r.slot)}: two executions ran at the same "
            f"time for {_length(r.overlap)}",
            slot=r.slot,
        )
        for r in reports
        if r.overlap > 0
    ]
    out += [
        Alert(
            "stale_holder",
            h.job,
            _holder_message(h),
            database=h.database,
            subject=_holder_subject(h),
        )
        for h in holders
        if h.stale
    ]
    by_name = {j.name: j for j in jobs}
    for job, count in sorted((duplicates or {}).items()):
        if _counts(count)[0] > 0:
            database = by_name[job].database if job in by_name else None
            out.append(
                Alert("duplicates", job, _duplicates_message(job, count, by_name), None, database)
            )
    return out


def clock_offsets(runs: Iterable[Run]) -> dict[str, tuple[float, datetime]]:
    """Each instance's clock offset (seconds, its wall clock minus the ledger server's) as its
    newest attempt recorded it, with that attempt's start."""
    found: dict[str, tuple[float, datetime]] = {}
    for run in runs:
        if run.clock_offset_ms is None:
            continue
        seen = found.get(run.instance)
        if seen is None or run.started_at > seen[1]:
            found[run.instance] = (run.clock_offset_ms / 1000, run.started_at)
    return found


def clock_alerts(runs: Iterable[Run], threshold: timedelta) -> list[Alert]:
    """One alert per instance whose clock is more than `threshold` off the ledger server's."""
    out = []
    for instance, (offset, at) in sorted(clock_offsets(runs).items()):
        if abs(offset) > threshold.total_seconds():
            way = "ahead of" if offset > 0 else "behind"
            out.append(
                Alert(
                    "clock_skew",
                    None,
                    f"instance {instance}'s clock is {abs(offset):.1f} s {way} the ledger "
                    f"server's (its attempt at {format_slot(at)}): its schedule fires off time",
                    subject=instance,
                )
            )
    return out
