"""Pauses of jobs in the ledger's database (`lockconsole_controls`, one row per paused job),
as the console lists, sets and clears them (SQLAlchemy Core). The run path reads them with
`pause_check.pause_of`. A pause whose `until` has passed is over: it is not listed, and the next
pause of that job replaces its row.
"""

from __future__ import annotations

import weakref
from datetime import datetime
from typing import Any

from lockconsole.backends.errors import classify
from lockconsole.backends.ledger.schema import CONTROLS_TABLE, schema
from lockconsole.backends.ledger.store import Ledger
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Pause

MAX_NOTE = 1000  # characters of a pause's note
# read-only ledgers whose control table was seen: it is not asked for again on every read
_HAS_TABLE: weakref.WeakSet[Ledger] = weakref.WeakSet()


class Pauses:
    """The console's side of the pauses in one ledger database."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def _table(self) -> Any:
        metadata, _ = schema()
        return metadata.tables[CONTROLS_TABLE]

    def _run(self, work: Any, *, again: bool = False) -> Any:
        from sqlalchemy.exc import SQLAlchemyError

        ledger = self.ledger
        try:
            if ledger.read_only and ledger not in _HAS_TABLE:  # no table is no pause
                from sqlalchemy import inspect

                if not inspect(ledger.sa_engine()).has_table(CONTROLS_TABLE):
                    return []
                _HAS_TABLE.add(ledger)  # asked once: a console refreshes every second
            elif not ledger.read_only and not ledger.schema_checked:
                ledger.create_schema()
            with ledger.sa_engine().begin() as conn:
                return work(conn)
        except SQLAlchemyError as exc:
            orig = getattr(exc, "orig", None) or exc
            if ledger in _HAS_TABLE and classify(orig) == "missing" and not again:
                _HAS_TABLE.discard(ledger)  # dropped since: asked again, once
                return self._run(work, again=True)
            raise DatabaseError(ledger.describe(orig)) from None

    def pauses(self, now: datetime) -> dict[str, Pause]:
        """Every pause in force at `now`, by job."""
        from sqlalchemy import or_, select

        t = self._table()
        query = select(t).where(or_(t.c.paused_until.is_(None), t.c.paused_until > now))
        rows = self._run(lambda conn: conn.execute(query).all())
        return {
            row.job: Pause(row.job, row.note, row.paused_by, row.paused_at, row.paused_until)
            for row in rows
        }

    def pause(self, pause: Pause) -> None:
        """Pause a job (replacing a pause it already has)."""
        t = self._table()
        values = {
            "job": pause.job,
            "note": pause.note[:MAX_NOTE],
            "paused_by": pause.paused_by[:255],
            "paused_at": pause.paused_at,
            "paused_until": pause.until,
        }

        def work(conn: Any) -> None:
            conn.execute(t.delete().where(t.c.job == pause.job))
            conn.execute(t.insert().values(**values))

        self._run(work)

    def resume(self, job: str, now: datetime) -> Pause | None:
        """End the pause of `job`; the pause that was in force, or None if it was not paused."""
        t = self._table()

        def work(conn: Any) -> Pause | None:
            from sqlalchemy import select

            row = conn.execute(select(t).where(t.c.job == job)).first()
            conn.execute(t.delete().where(t.c.job == job))
            if row is None or (row.paused_until is not None and row.paused_until <= now):
                return None
            return Pause(row.job, row.note, row.paused_by, row.paused_at, row.paused_until)

        result: Pause | None = self._run(work)
        return result
