"""The run path in two round trips on PostgreSQL: decide and record in one, finish and release in
one.

pg-session with the ledger in the lock's own database (`Merged` on the lock's connection):

- **decide and record**: one pipeline of two statements, one round trip. The first tries the lock
  (behind the pooler guard on a new connection) and leaves its answer in the transaction-local
  setting `lockconsole.got`; the second (`decide_run`) reads it, checks the slot's claim and
  inserts the attempt as "acquired" or "skipped", letting the lock go again when the slot already
  succeeded or the job is paused (a pause in force is read in the same statement; the paused
  attempt is then recorded in the pause's words). They are two statements, not one, because a
  statement reads the ledger as of its own start: a single statement would look for the slot's
  claim with a snapshot taken before its try-lock, and could miss a run that committed and let
  the lock go in between. The pipeline
  ends in one Sync, so both run in one implicit transaction (the skip or the "acquired" row
  commits with it, before the job starts); the session lock does not depend on that commit.
- **finish and release**: one statement (`finish_release_run`): the pg_locks check, the outcome
  UPDATE (conditional on the row still being "acquired" by this instance and process, and
  "lock_lost" when the check failed), then the session lock handed to a transaction-level hold of
  the same key and unlocked. The key stays held until the statement's transaction commits, so the
  outcome is written while the lock is held and whoever takes the key next sees it.

Anything unusual (the pooler guard stopped the try, an earlier attempt of the slot is still
"acquired", a missing table or privilege, an error) makes `decide` return None with `lock.held`
telling the truth, and `finish` return None with the lock untouched: the runner then goes on one
statement at a time, as it did before these were merged.
"""

from __future__ import annotations

import logging
import select
from functools import cache
from typing import TYPE_CHECKING, Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.merged import LOST, SKIP_HELD, Finished, Merged, settle
from lockconsole.backends.postgres.lock import PgSessionLock, PgXactLock, _PgLock
from lockconsole.backends.postgres.wire import Answer, wire_for
from lockconsole.model.errors import DatabaseError

if TYPE_CHECKING:
    from lockconsole.backends import Lock
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Database, Run

log = logging.getLogger(__name__)
_PIPELINE: list[bool | None] = [None]  # libpq supports pipeline mode (asked once)


_NO_KEY = {"key": None, "key1": None, "key2": None}
_NO_PARAMS: dict[str, Any] = {}


@cache
def _tried(try_sql: str, guarded: bool) -> str:
    """The try-lock (guarded on a new connection), its answer kept in lockconsole.got."""
    if guarded:
        return (
            "WITH t(got, pid, server_port, client_port) AS MATERIALIZED ("
            + try_sql
            + ") SELECT set_config('lockconsole.got', COALESCE(t.got::text, 'guard'), true),"
            " t.got, t.pid, t.server_port, t.client_port FROM t"
        )
    return (
        "WITH t(got, pid) AS MATERIALIZED ("
        + try_sql
        + ") SELECT set_config('lockconsole.got', t.got::text, true), t.got, t.pid,"
        " NULL::integer, NULL::integer FROM t"
    )


def pipelines() -> bool:
    """libpq supports pipeline mode (asked once)."""
    if _PIPELINE[0] is None:
        import psycopg

        _PIPELINE[0] = psycopg.Pipeline.is_supported()
    return bool(_PIPELINE[0])


def _keys(lock: _PgLock) -> dict[str, Any]:
    """The key as both statements take it: `key`, or `key1` and `key2`; the others None."""
    return {**_NO_KEY, **lock.key_params}


def for_postgres(lock: Lock, database: Database, ledger_database: Database) -> Merged | None:
    """The merged statements for a PostgreSQL lock and its ledger, or None."""
    kind = type(lock)
    if kind is not PgSessionLock and kind is not PgXactLock:
        return None
    if not pipelines():
        return None
    same = database.shares_connection(ledger_database)
    if isinstance(lock, PgSessionLock):
        return SessionMerged(lock) if same else None
    assert isinstance(lock, PgXactLock)
    return XactMerged(lock, same_database=same)


def _decide_params(ledger: Ledger, run: Run, lock: _PgLock, **given: Any) -> dict[str, Any]:
    params = ledger.insert_params(run)
    params.update(_keys(lock))
    now = ledger.now()
    params.update(held_message=SKIP_HELD, finished_at=now, finished=now, **given)
    return params


def _finish_params(
    ledger: Ledger,
    run: Run,
    lock: _PgLock,
    outcome: str,
    exit_code: int | None,
    message: str | None,
) -> dict[str, Any]:
    params = ledger.finish_params(run, outcome, exit_code=exit_code, message=message)
    params.update(_keys(lock))
    params.update(lock.identity)
    params["lost_message"] = params["message"] or LOST
    params["async_commit"] = lock.job.ledger_commit == "async"
    return params


class SessionMerged(Merged):
    """A pg-session lock's attempt in two round trips, on the lock's own connection."""

    def __init__(self, lock: PgSessionLock) -> None:
        self.lock = lock

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        """Try the lock, check the slot's claim, record: the recorded Run ("acquired" or
        "skipped"), or None when the runner must go on one statement at a time."""
        import psycopg

        lock = self.lock
        if lock.held or _spoke(lock):
            return None
        try_sql, tried_params, guarded = lock.try_statement(any_port=lock.job.allow_pooler)
        tried_sql = _tried(try_sql, guarded)
        decide_sql = sqlfiles.load("decide_run", "postgresql")
        params = _decide_params(ledger, run, lock, got=None, claims=claims, here=True)
        params["session_id"] = None
        try:
            answer = wire_for(lock.conn).exchange([(tried_sql, tried_params), (decide_sql, params)])
        except psycopg.Error as exc:
            self._undecided(None, exc)
            return None
        if answer.error is not None:
            self._undecided(answer.row(0), answer.error)
            return None
        tried_row = answer.first(0, lock.database.url.masked, "pg_try_advisory_lock")
        row = answer.first(1, lock.database.url.masked, "decide_run")
        _, got, pid, server_port, client_port = tried_row
        unlocked = row[4]
        lock.answered(got, pid, server_port, client_port, guarded=guarded)
        lock.held = bool(got) and not unlocked

        def slot_done() -> None:  # decide_run let the lock go, unless it had gone meanwhile
            if got and not unlocked:
                lock.lost_on_release = True

        return settle(
            ledger,
            run,
            row,
            params,
            pause_row=row[5:9],
            let_go=lock.release,
            session_id=lock.session_id,
            slot_done=slot_done,
        )

    def _undecided(self, tried: tuple[Any, ...] | None, exc: BaseException) -> None:
        """After a failed pipeline (`tried`: the try-lock's row, if it answered one): make
        lock.held true to the server, or raise if the connection is gone."""
        lock = self.lock
        if lock.gone():
            lock.held = False
            raise lock.failure("pg_try_advisory_lock", exc) from None
        got, pid = (tried[1], tried[2]) if tried is not None else (None, None)
        lock.held = bool(got)
        if got is None:  # the try itself may have run: ask the server
            lock.held = True
            lock.held = lock.still_held()
        if lock.held:  # the attempt's row names the session that holds the lock
            lock.session_id = int(pid) if pid is not None else self._backend_pid()
        log.debug("decide_run failed, going on one statement at a time: %s", exc)

    def _backend_pid(self) -> int | None:
        """pg_backend_pid() of the lock's connection; None if it cannot say."""
        import psycopg

        try:
            sql = sqlfiles.load("select_session_id", "postgresql")
            row = self.lock.conn.execute(sql).fetchone()
        except psycopg.Error:
            return None
        return None if row is None else int(row[0])

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        """Check, record and release in one statement; None (the lock untouched) on an error."""
        import psycopg

        lock = self.lock
        if not lock.held or lock.gone():
            return None
        finish_sql = sqlfiles.load("finish_release_run", "postgresql")
        params = _finish_params(ledger, run, lock, outcome, exit_code, message)
        params["release"], params["in_transaction"] = True, False
        try:
            answer = wire_for(lock.conn).exchange([(finish_sql, params)])
        except psycopg.Error as exc:
            answer = Answer([], exc)
        if answer.error is not None:
            log.debug(
                "finish_release_run failed, going on one statement at a time: %s", answer.error
            )
            return None
        row = answer.first(0, lock.database.url.masked, "finish_release_run")
        held, closed, released = bool(row[0]), row[1], bool(row[2])
        if held and released:
            lock.held = False
        elif not held:
            lock.held, lock.lost_on_release = False, True
        return Finished(held, closed, released)


class XactMerged(Merged):
    """A pg-xact lock's attempt: the try-lock, then decide_run on the ledger's connection; the
    outcome written inside the lock's transaction and committed with it (ledger in the lock's
    database), SAVEPOINT, outcome and COMMIT sent together."""

    def __init__(self, lock: PgXactLock, *, same_database: bool) -> None:
        self.lock = lock
        self.same_database = same_database

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        """BEGIN + try-lock (one round trip), then decide_run on the ledger's connection (one
        more). A refused try's ROLLBACK is a round trip of its own before decide_run: through a
        transaction-pooling PgBouncer the lock's server connection is handed back only when the
        transaction's end is synced, and decide_run may need a server connection from the same
        pool; a ROLLBACK still queued in a pipeline would let a full pool wait on itself."""
        import psycopg

        lock = self.lock
        if lock.held:
            return None
        got = lock.try_open()
        params = _decide_params(ledger, run, lock, got=str(got).lower(), claims=claims, here=False)
        params["session_id"] = lock.session_id
        try:
            if got:
                lock.held = True
                row = ledger.decide(params)
            else:
                lock.conn.rollback()
                row = ledger.decide(params)
        except psycopg.Error as exc:  # the refused try's ROLLBACK: nothing is held
            if not lock.gone():
                raise lock.failure("ROLLBACK", exc) from None
            return None
        except DatabaseError as exc:  # the ledger's trouble: go on one statement at a time
            log.debug("decide_run failed, going on one statement at a time: %s", exc)
            return None
        return settle(
            ledger,
            run,
            row,
            params,
            pause_row=row[5:9],
            let_go=lambda: lock.release(commit=False),
            session_id=lock.session_id,
        )

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        """Ledger in the lock's database: SAVEPOINT, finish_release_run and COMMIT in one round
        trip, so the outcome commits with the lock's transaction, which lets the lock go."""
        import psycopg

        lock = self.lock
        if not self.same_database or not lock.held or _spoke(lock):
            return None
        params = _finish_params(ledger, run, lock, outcome, exit_code, message)
        # inside the transaction that holds the key: held by construction (no pg_locks read).
        # This rests on SAVEPOINT going first in the same pipeline: it fails outside a
        # transaction block and in an aborted one, so the statement only runs while the
        # transaction that took the key (at its top level, before any savepoint) is alive.
        params["release"], params["in_transaction"] = False, True
        conn = lock.conn
        statements = [
            (sqlfiles.load("savepoint_finish"), _NO_PARAMS),
            (sqlfiles.load("finish_release_run", "postgresql"), params),
            (sqlfiles.load("commit_transaction"), _NO_PARAMS),
        ]
        try:
            answer = wire_for(conn).exchange(statements)
        except psycopg.Error as exc:
            answer = Answer([], exc)
        if answer.error is not None:
            log.debug(
                "finish_release_run failed, going on one statement at a time: %s", answer.error
            )
            if not lock.gone():
                try:  # the lock was taken before the savepoint: it is still held
                    conn.execute(sqlfiles.load("rollback_to_finish"))
                except psycopg.Error:
                    pass
            return None
        row = answer.first(1, lock.database.url.masked, "finish_release_run")
        held = bool(row[0])
        lock.held, lock.lost_on_release = False, not held
        return Finished(held, row[1], held)


def _spoke(lock: _PgLock) -> bool:
    """The idle connection is gone or has something to say (a terminated session's last
    words): the one-statement-at-a-time path handles that without a pipeline, which on a
    dead connection logs "error ignored terminating"."""
    if lock.gone():
        return True
    try:
        readable, _, _ = select.select([lock.conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


def _evolve(run: Run, **changes: Any) -> Run:
    from lockconsole.model.jobs import evolve

    return evolve(run, **changes)
