"""The run path's read of the ledger's control table (`lockconsole_controls`): a job's pause.

Raw driver, no SQLAlchemy: every attempt asks before it tries the lock. The console's side (list,
pause, resume) is `pauses.Pauses`. A pause whose `until` has passed is over.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.timestamps import from_db
from lockconsole.model.jobs import Pause


def pause_of(ledger: Ledger, job: str, now: datetime) -> Pause | None:
    """The pause of `job` in force at `now`, or None (one small query on the run path)."""
    row = ledger.fetch_one("select_control", {"job": job, "now": now})
    return None if row is None else pause_from(job, tuple(row), now)


def pause_from(job: str, row: tuple[Any, ...], now: datetime) -> Pause:
    """The Pause of a control row's (note, paused_by, paused_at, paused_until), as any dialect
    answers them (a MySQL user variable gives text)."""
    note, paused_by, paused_at, until = (_text(value) for value in row)
    return Pause(job, note, paused_by, from_db(paused_at) or now, from_db(until))


def _text(value: Any) -> Any:
    return value.decode() if isinstance(value, bytes | bytearray) else value
