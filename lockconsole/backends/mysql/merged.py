"""The run path in two round trips on MySQL/MariaDB, on the lock's own connection.

GET_LOCK is held by a connection, and the ledger lives in the same database, so the attempt's
statements ride the lock's connection, sent together (the connection allows several statements
per call) and committed one by one (autocommit):

- **decide and record** (`decide_run_mysql.sql`): the probe of the UPDATE privilege, GET_LOCK,
  the slot's claim read after the lock was taken, the job's pause, the INSERT of "acquired" or
  "skipped", and RELEASE_LOCK when the slot already succeeded or the job is paused (the paused
  attempt is then recorded in the pause's words);
- **finish and release** (`finish_release_run_mysql.sql`): IS_USED_LOCK = CONNECTION_ID(), the
  conditional outcome UPDATE (committed on its own), then RELEASE_LOCK.

Anything unusual (an error, an earlier attempt of the slot still "acquired") leaves `lock.held`
telling the truth and returns None: the runner goes on one statement at a time.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.ledger.timestamps import to_db
from lockconsole.backends.merged import LOST, SKIP_HELD, Finished, Merged, settle
from lockconsole.backends.mysql.lock import MysqlLock

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

log = logging.getLogger(__name__)


def _last_row(cur: Any) -> tuple[Any, ...] | None:
    """The row of the last result set of a multi-statement call (every set is read)."""
    row = cur.fetchone() if cur.description else None
    while cur.nextset():
        if cur.description:
            row = cur.fetchone()
    return None if row is None else tuple(row)


class MysqlMerged(Merged):
    """A GET_LOCK attempt in two round trips, on the lock's own connection."""

    def __init__(self, lock: MysqlLock) -> None:
        self.lock = lock

    def _call(self, name: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        with self.lock.conn.cursor() as cur:
            cur.execute(sqlfiles.load(name, "mysql"), params)
            return _last_row(cur)

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        import pymysql

        lock = self.lock
        if lock.held or lock.gone():
            return None
        params = ledger.insert_params(run)
        now = ledger.now()
        params.update(
            name=lock.name,
            claims=claims,
            held_message=SKIP_HELD,
            finished_at=to_db(now, "mysql"),
            finished=now,
        )
        try:
            row = self._call("decide_run", params)
        except (pymysql.MySQLError, OSError) as exc:
            self._undecided(exc)
            return None
        if row is None:
            self._undecided(None)
            return None
        unlocked, got, connection_id = row[4:7]
        lock.session_id = int(connection_id)
        if got is None:  # the server refused the name: the one-statement path says why
            return None
        lock.held = int(got) == 1 and not unlocked

        def slot_done() -> None:  # decide_run let the lock go, unless it had gone meanwhile
            if int(got) == 1 and not unlocked:
                lock.lost_on_release = True

        return settle(
            ledger,
            run,
            row,
            params,
            pause_row=row[7:11],
            let_go=lock.release,
            session_id=lock.session_id,
            slot_done=slot_done,
        )

    def _undecided(self, exc: BaseException | None) -> None:
        """After a failed call: lock.held as the server says, or a DatabaseError if it is gone."""
        import pymysql

        lock = self.lock
        if lock.gone():
            lock.held = False
            raise lock.failure(f"GET_LOCK({lock.name!r}, 0)", exc or OSError("no answer"))
        lock.held = True
        lock.held = lock.still_held()
        if lock.held and lock.session_id is None:  # the attempt's row names the holding session
            try:
                row = self._call("select_session_id", {})
            except (pymysql.MySQLError, OSError):
                row = None
            lock.session_id = None if row is None else int(row[0])
        log.debug("decide_run failed, going on one statement at a time: %s", exc)

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        import pymysql

        lock = self.lock
        if not lock.held or lock.gone():
            return None
        params = ledger.finish_params(run, outcome, exit_code=exit_code, message=message)
        params.update(name=lock.name, lost_message=params["message"] or LOST)
        try:
            row = self._call("finish_release_run", params)
        except (pymysql.MySQLError, OSError) as exc:
            log.debug("finish_release_run failed, going on one statement at a time: %s", exc)
            return None
        if row is None:
            return None
        held, changed, released = bool(row[0]), int(row[1]), bool(row[2])
        if not held:
            lock.held, lock.lost_on_release = False, True
        elif released:
            lock.held = False
        written = (outcome if held else "lock_lost") if changed == 1 else None
        return Finished(held, written, released)
