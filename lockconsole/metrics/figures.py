"""A console snapshot as metric figures: plain values, no Prometheus library needed.

Every figure comes from the Snapshot the console itself shows (the ledger's runs within
`[console] lookback`, the slot reports, the holders with their stale marks, the duplicate counts),
so a graph and the console never disagree. Labels stay bounded: job_name, database, outcome,
instance_name, status; never a pid, a lock key or a run id. (Not `job` and `instance`: Prometheus
gives every scraped series those two labels for the target, and would rename ours.)

A database this scrape could not read is unknown, never zero: the figures that come from it
(a job's attempts, slots, last success, ... when its ledger or its lock's database failed; a
database's holders) are left out, and `database_up` 0 and `job_up` 0 say why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Literal, get_args, get_type_hints

from lockconsole.config.loader import Config
from lockconsole.console.snapshot.reports import clock_offsets, firings
from lockconsole.model.jobs import Job
from lockconsole.model.views import SlotReport, Snapshot

PREFIX = "lockconsole_"
PERIOD_FIRINGS = 64  # a job's period: the longest gap between its last this-many firings


def slot_statuses() -> tuple[str, ...]:
    """Every status a slot report can have (a status added to SlotReport shows up here)."""
    return tuple(get_args(get_type_hints(SlotReport)["status"]))


@dataclass
class Figure:
    """One metric: its name (without the prefix), help, label names, and samples."""

    name: str
    help: str
    labels: tuple[str, ...]
    samples: list[tuple[tuple[str, ...], float]] = field(default_factory=list)
    kind: Literal["gauge", "counter"] = "gauge"  # a counter's name ends in _total

    def add(self, labels: tuple[str, ...], value: float) -> None:
        self.samples.append((labels, value))


def period(job: Job, now: datetime) -> float | None:
    """Seconds of the longest gap between the job's recent firings; None without a schedule."""
    fires = list(firings(job, now - timedelta(days=366), now, PERIOD_FIRINGS + 1))
    if len(fires) < 2:
        return None
    return max((a - b).total_seconds() for a, b in zip(fires, fires[1:], strict=False))


def known_jobs(snap: Snapshot, config: Config) -> set[str]:
    """The jobs this snapshot knows: their ledger and their lock's database were both read (with
    the lock's database unread, an attempt still marked acquired cannot be told alive)."""
    errors = {name for name, _ in snap.errors}
    return {
        name
        for name, job in config.jobs.items()
        if config.ledger_for(job).name not in errors and job.database not in errors
    }


def figures(snap: Snapshot, config: Config, scrape_seconds: float) -> list[Figure]:
    """The metrics of one snapshot (see the module's docstring for where each comes from)."""
    known = known_jobs(snap, config)
    return [
        *_job_figures(snap, config, known),
        *_slot_figures(snap, config, known),
        *_database_figures(snap, config, scrape_seconds),
    ]


def _job_figures(snap: Snapshot, config: Config, known: set[str]) -> Iterable[Figure]:
    lookback = config.console.lookback
    since = snap.taken_at - lookback
    jobs = sorted(config.jobs)
    runs = [r for r in snap.runs if r.started_at >= since and r.job in known]
    up = Figure(
        "job_up",
        "1 when this scrape read the job's ledger and its lock's database; 0: its figures are "
        "unknown and left out",
        ("job_name",),
    )
    for job in jobs:
        up.add((job,), 1 if job in known else 0)

    success = Figure(
        "job_last_success_timestamp_seconds",
        "When the job's newest succeeded attempt finished (within the lookback), Unix time",
        ("job_name",),
    )
    attempt = Figure(
        "job_last_attempt_timestamp_seconds",
        "When the job's newest attempt started (within the lookback), Unix time",
        ("job_name",),
    )
    last_success: dict[str, datetime] = {}
    last_attempt: dict[str, datetime] = {}
    for run in runs:
        if run.outcome == "succeeded":
            done = run.finished_at or run.started_at
            if run.job not in last_success or done > last_success[run.job]:
                last_success[run.job] = done
        if run.job not in last_attempt or run.started_at > last_attempt[run.job]:
            last_attempt[run.job] = run.started_at
    for status in snap.jobs:  # each job's newest, read by index: not only the history's page
        name, done_run, last_run = status.job.name, status.last_success, status.last_run
        if name not in known:
            continue
        if done_run is not None and (done := done_run.finished_at or done_run.started_at) >= since:
            last_success[name] = max(done, last_success.get(name, done))
        if last_run is not None and (started := last_run.started_at) >= since:
            last_attempt[name] = max(started, last_attempt.get(name, started))
    for job, at in sorted(last_success.items()):
        success.add((job,), at.timestamp())
    for job, at in sorted(last_attempt.items()):
        attempt.add((job,), at.timestamp())

    attempts = Figure(
        "job_attempts",
        "Attempts within the lookback, by outcome and instance",
        ("job_name", "outcome", "instance_name"),
    )
    # the ledger's own count over the lookback; a snapshot without one: its page of runs
    counted = {(j, o, i): n for j, o, i, n in snap.attempts} or Counter(
        (r.job, r.outcome, r.instance) for r in runs
    )
    for (job, outcome, instance), count in sorted(counted.items()):
        if job in known:
            attempts.add((job, outcome, instance), count)

    groups = Figure(
        "job_duplicate_groups",
        "Keys held by more than one row of the idempotency table",
        ("job_name",),
    )
    surplus = Figure(
        "job_duplicate_surplus_rows",
        "Rows of the idempotency table beyond one per key",
        ("job_name",),
    )
    for job, group_count, surplus_rows in snap.duplicates:
        if job not in known:
            continue  # counts of a table on a database this scrape could not read
        groups.add((job,), group_count)
        surplus.add((job,), surplus_rows)

    periods = Figure(
        "job_period_seconds",
        "The longest gap between the job's recent scheduled firings",
        ("job_name",),
    )
    grace = Figure(
        "job_grace_seconds", "How late a slot may start before it counts as missed", ("job_name",)
    )
    for name in jobs:
        gap = period(config.jobs[name], snap.taken_at)
        if gap is not None:
            periods.add((name,), gap)
            grace.add((name,), config.console.grace.total_seconds())
    window = Figure("lookback_seconds", "How far back attempts and slots are counted", ())
    window.add((), lookback.total_seconds())
    return [up, success, attempt, attempts, groups, surplus, periods, grace, window]


def _slot_figures(snap: Snapshot, config: Config, known: set[str]) -> Iterable[Figure]:
    slots = Figure(
        "job_slots",
        "Slots within the lookback, by status (every status, 0 included)",
        ("job_name", "status"),
    )
    newest = Figure(
        "job_last_slot_timestamp_seconds",
        "The newest slot within the lookback with this status, Unix time (alerts name it)",
        ("job_name", "status"),
    )
    abandoned = Figure(
        "job_abandoned_attempts",
        "Attempts still marked acquired whose lock was found free",
        ("job_name",),
    )
    by_status = Counter[tuple[str, str]]((s.job, s.status) for s in snap.slots if s.job in known)
    latest: dict[tuple[str, str], datetime] = {}
    for s in snap.slots:
        if s.job in known and ((s.job, s.status) not in latest or s.slot > latest[s.job, s.status]):
            latest[s.job, s.status] = s.slot
    abandoned_slot = Figure(
        "job_abandoned_slot_timestamp_seconds",
        "The newest slot with an abandoned attempt, Unix time (the alert names it)",
        ("job_name",),
    )
    left = Counter(a.job for a in snap.alerts if a.kind == "abandoned")
    left_slot: dict[str, datetime] = {}
    for a in snap.alerts:
        if a.kind == "abandoned" and a.job and a.slot:
            left_slot[a.job] = max(a.slot, left_slot.get(a.job, a.slot))
    for job in sorted(known):
        for status in slot_statuses():
            slots.add((job, status), by_status.get((job, status), 0))
            if (job, status) in latest:
                newest.add((job, status), latest[job, status].timestamp())
        abandoned.add((job,), left.get(job, 0))
        if job in left_slot:
            abandoned_slot.add((job,), left_slot[job].timestamp())
    return [slots, newest, abandoned, abandoned_slot]


def _database_figures(snap: Snapshot, config: Config, scrape_seconds: float) -> Iterable[Figure]:
    errors = dict(snap.errors)
    up = Figure(
        "database_up", "1 when the database answered this scrape, 0 when not", ("database",)
    )
    holders = Figure("database_holders", "Sessions holding a lock (granted)", ("database",))
    waiters = Figure("database_waiters", "Sessions waiting for a lock", ("database",))
    stale = Figure("database_stale_holders", "Holders that look stale", ("database",))
    read = Figure(
        "database_read_seconds", "How long this scrape's reads of the database took", ("database",)
    )
    granted = Counter(h.database for h in snap.holders if h.granted)
    waiting = Counter(h.database for h in snap.holders if not h.granted)
    stale_count = Counter(h.database for h in snap.holders if h.granted and h.stale)
    seconds = dict(snap.read_seconds)
    for name in sorted(config.databases):
        up.add((name,), 0 if name in errors else 1)
        if name in errors:
            continue  # no figures rather than zeros for a database that did not answer
        holders.add((name,), granted.get(name, 0))
        waiters.add((name,), waiting.get(name, 0))
        stale.add((name,), stale_count.get(name, 0))
        if name in seconds:
            read.add((name,), seconds[name])
    scrape = Figure("scrape_duration_seconds", "How long the whole scrape took", ())
    scrape.add((), scrape_seconds)
    taken = Figure("snapshot_timestamp_seconds", "When the snapshot was taken, Unix time", ())
    taken.add((), snap.taken_at.timestamp())
    offsets = Figure(
        "instance_clock_offset_seconds",
        "An instance's wall clock minus the ledger server's, as its newest attempt recorded it",
        ("instance_name",),
    )
    for instance, (offset, _) in sorted(clock_offsets(snap.runs).items()):
        offsets.add((instance,), offset)
    return [up, holders, waiters, stale, read, scrape, taken, offsets]
