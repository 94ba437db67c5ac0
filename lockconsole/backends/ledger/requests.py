"""Run requests (`lockconsole_requests`, in the ledger's database): "run this job now", asked of
every `lockconsole schedule` instance (or one), served by the first instance to take the row.

A request goes queued -> running (served_by) -> its run's outcome (succeeded, failed, lock_lost,
skipped, paused) with the run's id, or expired (no instance took it before expires_at), or error
(the serving instance could not start it). Raw driver, no SQLAlchemy: servers run it every few
seconds; on PostgreSQL a NOTIFY on `lockconsole_requests` wakes the instances that LISTEN.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.timestamps import from_db

CHANNEL = "lockconsole_requests"
FINAL_STATES = ("succeeded", "failed", "lock_lost", "skipped", "paused", "expired", "error")
EXPIRED_REASON = "no instance serving the job took it before it expired"


@dataclass(frozen=True)
class Request:
    id: int
    job: str
    slot: datetime | None  # None: a manual run in its own slot
    instance: str | None  # None: any instance that serves the job
    forced: bool
    state: str
    served_by: str | None
    run_id: int | None
    requested_by: str
    requested_at: datetime
    updated_at: datetime
    expires_at: datetime
    reason: str | None

    @property
    def final(self) -> bool:
        return self.state in FINAL_STATES


def _request(row: Any) -> Request:
    (id_, job, slot, instance, forced, state, served_by, run_id, by, at, updated, expires, why) = (
        row
    )
    return Request(
        int(id_),
        job,
        from_db(slot),
        instance,
        bool(forced),
        state,
        served_by,
        None if run_id is None else int(run_id),
        by,
        from_db(at) or datetime.min,
        from_db(updated) or datetime.min,
        from_db(expires) or datetime.min,
        why,
    )


def submit(
    ledger: Ledger,
    job: str,
    *,
    slot: datetime | None,
    instance: str | None,
    forced: bool,
    requested_by: str,
    now: datetime,
    expires_at: datetime,
) -> int:
    """Queue a request and wake the listening instances; its id."""
    params = {
        "job": job,
        "slot": slot,
        "instance": instance,
        "forced": int(forced),
        "requested_by": requested_by[:255],
        "now": now,
        "expires_at": expires_at,
    }
    new_id = ledger.insert("insert_request", params)
    if ledger.dialect == "postgresql":
        ledger.fetch_one("notify_requests", {"job": job})
    return int(new_id)


def get(ledger: Ledger, request_id: int) -> Request | None:
    row = ledger.fetch_one("select_request", {"id": request_id})
    return None if row is None else _request(row)


def queued(ledger: Ledger, jobs: set[str], instance: str, now: datetime) -> list[Request]:
    """The queued, unexpired requests this instance may serve (its jobs; for it or for any)."""
    rows = ledger.fetch_all("select_queued_requests", {"now": now})
    found = [_request(row) for row in rows]
    return [r for r in found if r.job in jobs and r.instance in (None, instance)]


def claim(ledger: Ledger, request_id: int, instance: str, now: datetime) -> bool:
    """Take a queued request; True for the one instance whose UPDATE found it queued."""
    params = {"id": request_id, "instance": instance, "now": now}
    return ledger.update("claim_request", params) == 1


def record(
    ledger: Ledger,
    request_id: int,
    instance: str,
    state: str,
    now: datetime,
    *,
    run_id: int | None = None,
    reason: str | None = None,
) -> None:
    """Record the run (and then the outcome) of a request this instance serves."""
    params = {
        "id": request_id,
        "instance": instance,
        "state": state,
        "run_id": run_id,
        "reason": reason,
        "now": now,
    }
    ledger.update("update_request", params)


def expire(ledger: Ledger, now: datetime) -> int:
    """Mark queued requests past their expiry as expired; how many."""
    return ledger.update("expire_requests", {"now": now, "reason": EXPIRED_REASON})
