"""PostgreSQL inspector: advisory-lock holders and waiters from pg_locks, and guarded release.

`holders()` is one statement (select_pg_holders.sql): one row per advisory lock in the
connected database with only the lock's columns, plus one row per session behind them with
that session's pg_stat_activity columns, so a session holding 10,000 locks ships its query
text once, not 10,000 times. Python joins them back into `Holder` values.

`release()` terminates the holding session with terminate_pg_holder.sql, which signals the pid only
if it still holds that key, granted, in this database, with the backend_start the operator saw, so a
pid reused meanwhile is never hit. pg_locks cannot tell whether the lock is session- or
transaction-level: terminating the session ends both.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import MISSING
from dataclasses import fields as dataclass_fields
from datetime import timedelta
from operator import itemgetter
from typing import Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.connect import Timeouts, connect_pg, first_line
from lockconsole.backends.errors import classify
from lockconsole.backends.inspect import HolderList, ReleaseResult
from lockconsole.config.urls import scrub
from lockconsole.model.construct import construct, gc_paused
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job, LockKey
from lockconsole.model.keys import oid_to_int4, pg_locks_identity
from lockconsole.model.views import Holder
from lockconsole.text.times import span

SOURCE = "pg_locks"
TERMINATE_TIMEOUT_MS = 5000
HIDDEN_QUERY = "<insufficient privilege>"
_DEFAULTS = {f.name: f.default for f in dataclass_fields(Holder) if f.default is not MISSING}
_LOCK_COLUMNS = itemgetter(1, 2, 3, 4, 5, 6, 7)  # pid .. waitstart of a lock row (kind 0)
_TWO_63, _TWO_64 = 1 << 63, 1 << 64
APP_PREFIX = "lockconsole:"  # runner.application_name: lockconsole:<job>@<instance>


def hidden_message(user: str) -> str:
    """What an operator sees on a holder whose session details pg_stat_activity hides."""
    return f"session details hidden: grant pg_read_all_stats (or pg_monitor) to {user}"


class PgInspector:
    """Holders of PostgreSQL advisory locks in one database, and a guarded force-release."""

    source = SOURCE

    def __init__(
        self,
        database: Database,
        *,
        application_name: str = "lockconsole:console",
        timeouts: Timeouts | None = None,
    ) -> None:
        self.database = database
        self.application_name = application_name
        self.timeouts = timeouts  # None: connect_pg's defaults, no statement_timeout
        self._conn: Any = None

    # -- connection -------------------------------------------------------------------------

    def _connection(self) -> Any:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self.close()
            self._conn = connect_pg(
                self.database.url, application_name=self.application_name, timeouts=self.timeouts
            )
        return self._conn

    def abort(self) -> None:
        """From another thread: end a statement that waits on a silent server, by shutting
        the connection's socket down (the waiting call then fails at once)."""
        import socket

        conn = self._conn
        try:
            fd = conn.pgconn.socket if conn is not None and not conn.closed else -1
        except Exception:
            return
        if fd < 0:
            return
        try:
            with socket.socket(fileno=os.dup(fd)) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _fail(self, what: str, exc: BaseException) -> DatabaseError:
        url = self.database.url
        self.close()
        return DatabaseError(f"{url.masked}: {what} failed: {scrub(first_line(exc), url)}")

    def close(self) -> None:
        """Close the inspector's connection (idempotent)."""
        import psycopg

        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    # -- holders ----------------------------------------------------------------------------

    def holders(self, jobs: Sequence[Job]) -> HolderList:
        """Every advisory holder and waiter in this database, in one statement."""
        import psycopg

        conn = self._connection()
        try:
            # binary results: ~25% less decoding than text for 10,000 lock rows
            with conn.cursor(binary=True) as cur:
                rows = cur.execute(sqlfiles.load("select_pg_holders")).fetchall()
        except psycopg.Error as exc:
            raise self._fail("listing advisory locks", exc) from None
        with gc_paused():  # 10,000 new Holders: collections on the way cost ~1/3 of _build
            return self._build(rows, self._job_index(jobs))

    def _job_index(self, jobs: Sequence[Job]) -> dict[tuple[int, int, int], Job]:
        """Configured PostgreSQL jobs of this database by (classid, objid, objsubid)."""
        index: dict[tuple[int, int, int], Job] = {}
        for job in jobs:
            if job.database != self.database.name or job.key.kind not in ("int64", "int4pair"):
                continue
            if job.strategy in ("pg-session", "pg-xact"):
                index.setdefault(pg_locks_identity(job.key), job)
        return index

    def _build(
        self, rows: list[tuple[Any, ...]], index: dict[tuple[int, int, int], Job]
    ) -> HolderList:
        user, datname = "the operator's role", None
        session_rows: dict[int, tuple[Any, ...]] = {}
        locks: list[tuple[Any, ...]] = []
        for row in rows:
            if row[0] == 0:
                locks.append(row)
            elif row[0] == 1:
                session_rows[row[1]] = row
            else:
                user, datname = row[8], row[9]
        common = {
            **_DEFAULTS,
            "database": self.database.name,
            "kind": "advisory",
            "source": SOURCE,
            "datname": datname,
            "key_kind": "int64",
        }
        hidden_text, any_hidden = hidden_message(user), False
        # Per pid, the field dicts its granted and its waiting locks start from (a copy each).
        templates: dict[int | None, tuple[dict[str, Any], dict[str, Any]]] = {}
        for pid, row in session_rows.items():
            info = _session(row)
            if info.pop("_hidden"):
                info["hidden"], any_hidden = hidden_text, True
            waiting = {**common, **info, "pid": pid, "granted": False}
            templates[pid] = ({**waiting, "granted": True, "blocked_by": ()}, waiting)
        jobs = {
            identity: (job.name, job.strategy == "pg-xact", f"{APP_PREFIX}{job.name}@")
            for identity, job in index.items()
        }
        job_objids = {identity[1] for identity in jobs}
        out: list[Holder] = []
        append, new = out.append, _new_holder
        for pid, classid, objid, objsubid, mode, granted, waitstart in map(_LOCK_COLUMNS, locks):
            pair = templates.get(pid)
            if pair is None:  # no pg_stat_activity row: a prepared transaction, or just gone
                waiting = {**common, "pid": pid, "granted": False}
                pair = templates[pid] = ({**waiting, "granted": True}, waiting)
            base = pair[0] if granted else pair[1]
            values = base.copy()
            if objsubid == 1:
                u = (classid << 32) | objid  # keys.join_int64, inlined
                values["key"] = str(u - _TWO_64 if u >= _TWO_63 else u)
            else:
                values["key"] = f"{oid_to_int4(classid)},{oid_to_int4(objid)}"
                values["key_kind"] = "int4pair"
            values["mode"] = mode
            values["waiting_since"] = waitstart
            if objid in job_objids and (classid, objid, objsubid) in jobs:
                name, xact, prefix = jobs[(classid, objid, objsubid)]
                values["job"] = name
                if xact and granted:  # pg-xact: the lock lives as long as the transaction
                    values["held_since"] = base["xact_start"]
                app = base["application_name"]
                if app and app.startswith(prefix):
                    values["instance"] = app[len(prefix) :] or None
            append(new(values))
        notes: list[str] = []
        if any_hidden:
            notes.append(
                f"details of other roles' sessions are hidden from {user}: grant "
                f"pg_read_all_stats (or pg_monitor) to {user} to see them"
            )
        if None in templates:
            notes.append("some advisory locks are held by prepared transactions (no pid)")
        return HolderList(tuple(out), SOURCE, tuple(notes))

    # -- release ----------------------------------------------------------------------------

    def release(self, holder: Holder, *, actor: Actor, audit: AuditLog) -> ReleaseResult:
        """Terminate the holder's session if it still holds that key; audited first."""
        refusal = self._refusal(holder)
        if refusal:
            return ReleaseResult("error", refusal, holder)
        target = (
            f"pg advisory key {holder.key} ({holder.key_kind}) held by pid {holder.pid} "
            f"in database {holder.datname or self.database.name}"
            + (
                f", backend_start {holder.backend_start.isoformat()}"
                if holder.backend_start
                else ""
            )
        )
        entry = audit.begin(actor, "release", target)  # raises: nothing is done
        try:
            result = self._terminate(holder)
        except DatabaseError as exc:
            audit.finish(entry, "error", str(exc))
            raise
        audit.finish(entry, result.status, result.message)
        return result

    def _refusal(self, holder: Holder) -> str | None:
        if holder.database != self.database.name:
            return (
                f"holder is in database {holder.database!r}, not {self.database.name!r}; "
                "nothing was done"
            )
        if holder.kind != "advisory" or holder.key_kind not in ("int64", "int4pair"):
            return f"only PostgreSQL advisory locks can be released here, not a {holder.kind}"
        if not holder.granted:
            return (
                f"pid {holder.pid} is waiting for key {holder.key}, not holding it; only "
                "granted holders are released"
            )
        if holder.pid is None:
            return f"key {holder.key} is held by a prepared transaction; use ROLLBACK PREPARED"
        return None

    def _gone(self, holder: Holder) -> bool:
        """After our own backend was terminated (a pooler): is the holder's lock gone now?"""
        self.close()
        try:
            current = self.holders(()).holders
        except DatabaseError:
            return False
        return not any(h.pid == holder.pid and h.key == holder.key and h.granted for h in current)

    def _terminate(self, holder: Holder) -> ReleaseResult:
        import psycopg

        lock_key = _lock_key(holder)
        classid, objid, objsubid = pg_locks_identity(lock_key)
        params = {
            "pid": holder.pid,
            "classid": classid,
            "objid": objid,
            "objsubid": objsubid,
            "backend_start": holder.backend_start,
            "timeout_ms": TERMINATE_TIMEOUT_MS,
        }
        conn = self._connection()
        user = conn.info.user
        started = time.monotonic()
        try:
            row = conn.execute(sqlfiles.load("terminate_pg_holder"), params).fetchone()
        except psycopg.Error as exc:
            if exc.sqlstate == "57P01" and self._gone(holder):
                return ReleaseResult("released", _SELF_TERMINATED.format(h=holder), holder)
            if conn.closed or conn.broken:
                raise self._fail("force-release", exc) from None
            text = scrub(first_line(exc), self.database.url)
            if classify(exc) == "denied":
                return ReleaseResult("denied", _denied(text, user), holder)
            return ReleaseResult(
                "error", f"force-release of pid {holder.pid} failed: {text}", holder
            )
        took = time.monotonic() - started
        if row is None:
            msg = f"holder changed: pid {holder.pid} no longer holds key {holder.key}"
            if holder.backend_start is not None:
                msg += " (or the pid now belongs to another session)"
            return ReleaseResult("holder_changed", msg + "; nothing was done", holder)
        unguarded = ""
        if holder.backend_start is None:
            unguarded = (
                f" (without the backend_start guard: {user} cannot see it, so a reused pid "
                "could have been hit; grant pg_read_all_stats to close that gap)"
            )
        if not row[1]:
            return ReleaseResult(
                "error",
                f"pid {holder.pid} was signalled but had not exited after "
                f"{span(timedelta(milliseconds=TERMINATE_TIMEOUT_MS))}; "
                f"key {holder.key} may still be held" + unguarded,
                holder,
            )
        return ReleaseResult(
            "released",
            f"released key {holder.key}: terminated pid {holder.pid} in "
            f"{span(timedelta(seconds=took))}" + unguarded,
            holder,
        )


_SELF_TERMINATED = (
    "released key {h.key}: pid {h.pid} is gone; the pooler ran the statement on the holder's "
    "own server connection, which terminated itself"
)


def _session(row: tuple[Any, ...]) -> dict[str, Any]:
    """Holder fields of one pg_stat_activity row (plus `_hidden`), shared by its locks."""
    query = row[15]
    hidden = query == HIDDEN_QUERY or (row[11] is None and row[8] is not None)
    return {
        "user": row[8],
        "application_name": row[9] or None,
        "client_addr": row[10],
        "backend_start": row[11],
        "xact_start": row[12],
        "state": row[13],
        "state_since": row[14],
        "query": None if query == HIDDEN_QUERY else query,
        "blocked_by": tuple(row[16]) if row[16] else (),
        "_hidden": hidden,
    }


def _lock_key(holder: Holder) -> LockKey:
    if holder.key_kind == "int64":
        return LockKey("int64", int(holder.key))
    a, b = holder.key.split(",")
    return LockKey("int4pair", (int(a), int(b)))


def _denied(server_message: str, user: str) -> str:
    return (
        f"denied: {server_message}. To end another role's session, {user} needs "
        f"pg_signal_backend (GRANT pg_signal_backend TO {user}), and pg_read_all_stats for "
        "the pid-reuse guard; a superuser's session can be ended only by a superuser"
    )


def _new_holder(values: dict[str, Any]) -> Holder:
    """Holder(**values) for a complete field dict, without re-running __init__ per lock."""
    return construct(Holder, values)
