"""The run path's read of the ledger's control table (`lockconsole_controls`): a job's pause.

Raw driver, no SQLAlchemy: every attempt asks before it tries the lock. The console's side (list,
pause, resume) is `pauses.Controls`. A pause whose `until` has passed is over.
"""

from __future__ import annotations

from datetime import datetime

from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.times import from_db
from lockconsole.model.jobs import Pause


def pause_of(ledger: Ledger, job: str, now: datetime) -> Pause | None:
    """The pause of `job` in force at `now`, or None (one small query on the run path)."""
    row = ledger.fetch_one("select_control", {"job": job, "now": now})
    if row is None:
        return None
    note, paused_by, paused_at, until = row
    return Pause(job, note, paused_by, from_db(paused_at) or now, from_db(until))
