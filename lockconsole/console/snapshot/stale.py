"""Stale holders: locks held past max_duration, by idle or orphaned sessions, or after the run
that took them finished. Pure functions over holders and ledger runs; no database access.

A holder is "ours" when its job matches and a ledger run of that job has the holder's backend
pid as `session_id` (and did not start well before, or end before, the holder's backend_start:
pids are reused), or, for a lease, the holder's fencing token (else its owner as the run's
instance). Our holders get `held_since`, `instance` and `run_id` from that run. Waiters are
never stale. Every other holder's `held_since` is what `held.py` could tell (often a lower
bound): a keep-alive statement of an idle session resets its `state_since`, never the time its
lock is held, so an idle holder of a job's lock with no running run is stale either way.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime, timedelta

from lockconsole.console.snapshot.held import is_idle
from lockconsole.model.construct import evolve
from lockconsole.model.jobs import Job, Run
from lockconsole.model.views import Holder
from lockconsole.text.times import reading, stamp

FINISHED = frozenset({"succeeded", "failed", "lock_lost"})
SETTLE = timedelta(seconds=2)  # a run finished this recently may be mid-release: not stale yet
CONNECT_SLACK = timedelta(seconds=30)  # started_at is stamped before the lock session connects
LEASE_SLACK = timedelta(seconds=1)  # clock slack when telling a min_hold lease from a stuck one
EXPIRING = ("lease", "redis")  # held until a stored expiry (a lease row, a Redis key's TTL)
ORPHANED = "held by a PgBouncer server connection whose client is gone"


def _ours(holder: Holder, runs: list[Run]) -> Run | None:
    """The latest ledger run (of the holder's job) that took this holder's lock, if any."""
    if holder.kind in EXPIRING:
        if holder.fencing_token is not None:
            found = [r for r in runs if r.fencing_token == holder.fencing_token]
        else:  # a lease's owner is the run's instance; a Redis value names the run's host
            found = [
                r
                for r in runs
                if (r.host if holder.kind == "redis" else r.instance) == holder.locked_by
                and (holder.held_since is None or r.started_at <= holder.held_since + SETTLE)
            ]
    elif holder.pid is None:
        return None
    else:
        found = [r for r in runs if r.session_id == holder.pid and _after(r, holder.backend_start)]
    found = [r for r in found if r.outcome != "skipped"]
    return max(found, key=lambda r: (r.started_at, r.id or 0), default=None)


def _after(run: Run, backend_start: datetime | None) -> bool:
    """Whether `run` can belong to a session that started at `backend_start` (pids are reused).

    The runner stamps started_at just before it opens the lock connection, hence the slack.
    """
    if backend_start is None:
        return True
    if run.finished_at is not None and run.finished_at < backend_start:
        return False
    return run.started_at >= backend_start - CONNECT_SLACK


def _held_since(holder: Holder, run: Run | None) -> datetime | None:
    """Since when the lock is held: a lease's locked_at, our run's start, else what the
    database or the console's sightings tell (held.py)."""
    if holder.kind in EXPIRING and holder.held_since is not None:
        return holder.held_since
    if run is not None:
        return run.started_at
    return holder.held_since


def _running(holder: Holder, run: Run | None, runs: list[Run]) -> bool:
    """Whether the ledger has a running attempt that can be this holder's."""
    if run is not None:
        return run.outcome == "acquired"
    return any(
        r.outcome == "acquired" and r.session_id is None and _after(r, holder.backend_start)
        for r in runs
    )


def _finished_reason(holder: Holder, job: Job, run: Run, now: datetime) -> str | None:
    """Reason (d): the run that took the lock is over, but the lock is still held."""
    if run.outcome not in FINISHED or run.finished_at is None:
        return None
    if now - run.finished_at < SETTLE:
        return None
    if holder.kind in EXPIRING and holder.lock_until is not None:
        locked_at = holder.held_since or run.started_at
        if holder.lock_until <= locked_at + job.min_hold + LEASE_SLACK:
            return None  # released: the lease keeps its min_hold (lockAtLeastFor)
    # an absolute time: the alert is logged once and must stay true afterwards
    return (
        f"run {run.id} on {run.instance} finished ({run.outcome}) at {stamp(run.finished_at)} "
        "but its lock is still held"
    )


def stale_reasons(
    holder: Holder,
    job: Job | None,
    runs: list[Run],
    *,
    now: datetime,
    idle_threshold: timedelta,
    orphaned_pids: set[int],
) -> tuple[Holder, list[str]]:
    """The holder with ledger facts filled in, and every reason it looks stale."""
    run = _ours(holder, runs) if job is not None else None
    held = _held_since(holder, run)
    if run is not None:
        held_from = holder.held_from if holder.kind in EXPIRING else "run"
        holder = _evolve(
            holder, held_since=held, held_from=held_from, instance=run.instance, run_id=run.id
        )
    reasons: list[str] = []
    limit = job.max_duration if job is not None else None
    bound = "at least " if holder.held_from == "at_least" else ""
    if limit is not None and held is not None and now - held > limit:
        reasons.append(
            f"held {bound}{reading(now - held)}, longer than max_duration {reading(limit)}"
        )
    if is_idle(holder.state) and holder.state_since is not None:
        idle = now - holder.state_since
        if job is None or not _running(holder, run, runs):
            why = " with no running run in the ledger" if job is not None else ""
            if idle > idle_threshold:
                reasons.append(f"{holder.state} for {reading(idle)}{why}")
            elif (
                job is not None and run is None and held is not None and now - held > idle_threshold
            ):
                # a keep-alive statement made it active a moment ago; its lock is as old
                reasons.append(
                    f"{holder.state}, holding the lock {bound}{reading(now - held)}{why}"
                )
    if holder.pid is not None and holder.pid in orphaned_pids:
        reasons.append(ORPHANED)
    if holder.kind == "redis" and limit is not None and holder.lock_until is not None:
        ttl = holder.lock_until - now
        if ttl > 2 * limit:  # far past anything the job's own SET PX max_duration gives
            reasons.append(f"expires in {reading(ttl)}, far past max_duration {reading(limit)}")
    if job is not None and run is not None:
        finished = _finished_reason(holder, job, run, now)
        if finished:
            reasons.append(finished)
    return holder, reasons


def mark_stale(
    holders: Iterable[Holder],
    jobs: Iterable[Job],
    runs: Iterable[Run],
    *,
    now: datetime,
    idle_threshold: timedelta,
    orphaned_pids: set[int] | None = None,
) -> tuple[Holder, ...]:
    """Copies of `holders` with `stale` set (reasons joined by "; ") and ledger facts filled.

    A holder that nothing changes is returned as it is (not copied). Holders of no configured
    job (say, an application's own 10,000 advisory locks) share their session's verdict: it
    depends only on the pid's state, so it is worked out once per (pid, state, state_since).
    """
    by_name = {j.name: j for j in jobs}
    runs_by_job: dict[str, list[Run]] = defaultdict(list)
    for r in runs:
        runs_by_job[r.job].append(r)
    orphaned = orphaned_pids or set()
    unmapped: dict[tuple[object, ...], str | None] = {}
    out: list[Holder] = []
    for holder in holders:
        if not holder.granted:
            out.append(holder)
            continue
        job = by_name.get(holder.job) if holder.job else None
        if job is None:
            memo = (holder.pid, holder.state, holder.state_since)
            if memo in unmapped:
                stale = unmapped[memo]
            else:
                _, reasons = stale_reasons(
                    holder,
                    None,
                    [],
                    now=now,
                    idle_threshold=idle_threshold,
                    orphaned_pids=orphaned,
                )
                stale = unmapped[memo] = "; ".join(reasons) or None
            out.append(holder if stale == holder.stale else _evolve(holder, stale=stale))
            continue
        marked, reasons = stale_reasons(
            holder,
            job,
            runs_by_job.get(job.name, []),
            now=now,
            idle_threshold=idle_threshold,
            orphaned_pids=orphaned,
        )
        out.append(_evolve(marked, stale="; ".join(reasons) or None))
    return tuple(out)


def _evolve(holder: Holder, **changes: object) -> Holder:
    """`holder` with `changes` (itself when they change nothing), built without __init__."""
    if all(getattr(holder, name) == value for name, value in changes.items()):
        return holder
    return evolve(holder, **changes)
