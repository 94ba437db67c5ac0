"""A lease on PostgreSQL, with the ledger in the lease table's database, in two round trips.

The ledger's statements ride the lease's own autocommit connection:

- **decide and record**: one pipeline of two statements, one round trip. The first is the
  lease's acquire (ShedLock's insert-or-take), its answer and fencing token left in the
  transaction-local settings `lockconsole.got` and `lockconsole.token`; the second is
  `decide_run` (the slot's claim read after the lease was taken, the attempt recorded with its
  token). Both run in one implicit transaction: the lease and its attempt commit together, or
  neither does.
- **finish and release** (`finish_release_lease`): one statement, one transaction: the lease's
  release, only while the row is still ours and unexpired (which is the lease's last check),
  and the outcome, "lock_lost" when the release found the lease gone.

Anything unusual leaves `lock.held` telling the truth and returns None: the runner goes on one
statement at a time. Leases on MySQL and SQLite are not merged.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from lockconsole.backends import sqlfiles
from lockconsole.backends.lease.lock import LeaseLock
from lockconsole.backends.merged import LOST, SKIP_HELD, Finished, Merged, settle
from lockconsole.model.errors import DatabaseError

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

log = logging.getLogger(__name__)


class LeaseMerged(Merged):
    """A PostgreSQL lease's attempt in two round trips, on the lease's own connection."""

    def __init__(self, lock: LeaseLock) -> None:
        self.lock = lock

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        import psycopg

        from lockconsole.backends.postgres.wire import wire_for

        lock = self.lock
        if lock.held:
            return None
        conn, acquire = lock.merged_statement("acquire")
        token = "max(t.token)::text" if lock.has_fencing else "''"
        tried = (
            f"WITH t(token) AS ({acquire.sql}) "
            "SELECT set_config('lockconsole.got', (count(*) > 0)::text, true), "
            f"set_config('lockconsole.token', COALESCE({token}, ''), true) FROM t"
        )
        now = ledger.now()
        params = ledger.insert_params(run)
        params.update(
            key=None, key1=None, key2=None, got=None, claims=claims, here=False, session_id=None
        )
        params.update(held_message=SKIP_HELD, finished_at=now, finished=now)
        statements = [
            (tried, acquire.params({})),
            (sqlfiles.load("decide_run", "postgresql"), params),
        ]
        try:
            answer = wire_for(conn).exchange(statements)
            got_text, token_text = answer.first(0, lock.database.url.masked, "the lease's acquire")
            row = answer.first(1, lock.database.url.masked, "decide_run")
        except psycopg.Error as exc:  # the pipeline's one transaction rolled back: no lease
            lock.held = False
            if conn.closed or conn.broken:
                lock.drop_connection()
                raise lock.failed(exc) from None
            log.debug("decide_run failed, going on one statement at a time: %s", exc)
            return None
        if got_text == "true":
            lock.held, lock.lost_before_release = True, False
            lock.fencing_token = int(token_text) if token_text else None
        decided = settle(
            ledger, run, row, params, pause_row=row[5:9], let_go=lock.release, session_id=None
        )
        if decided is not None and decided.outcome == "acquired":
            from lockconsole.model.jobs import evolve

            decided = evolve(decided, fencing_token=lock.fencing_token)
        return decided

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        import psycopg

        from lockconsole.backends.postgres.wire import wire_for

        lock = self.lock
        if not lock.held:
            return None
        try:
            conn, release = lock.merged_statement("release_held", drop=False)
        except DatabaseError:
            return None
        sql = sqlfiles.load("finish_release_lease", "postgresql").replace("{released}", release.sql)
        params = dict(release.params({"token": lock.fencing_token}))
        params.update(ledger.finish_params(run, outcome, exit_code=exit_code, message=message))
        params["lost_message"] = params["message"] or LOST
        params["async_commit"] = lock.job.ledger_commit == "async"
        try:
            answer = wire_for(conn).exchange([(sql, params)])
            held, closed = answer.first(0, lock.database.url.masked, "finish_release_lease")[:2]
        except psycopg.Error as exc:  # rolled back: nothing written, nothing released
            log.debug("finish_release_lease failed, going on one statement at a time: %s", exc)
            if conn.closed or conn.broken:
                lock.drop_connection()
            return None
        lock.held, lock.lost_before_release = False, not held
        return Finished(bool(held), closed, bool(held))
