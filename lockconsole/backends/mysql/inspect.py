"""MySQL/MariaDB user-level locks (GET_LOCK): list holders and waiters, force-release a holder.

Holders are read from the best source this account can use, detected once per
inspector: performance_schema.metadata_locks (MySQL 8; MariaDB >= 10.5.2 with
performance_schema=ON; shows waiters), else MariaDB's METADATA_LOCK_INFO plugin (granted locks
only; waiters come from PROCESSLIST threads in state 'User lock', their name parsed from the
query text), else IS_USED_LOCK for each configured name (no waiters, no unconfigured names).

Release is `KILL CONNECTION IF(IS_USED_LOCK(name) = id, id, 0)`: the server evaluates the
check and kills in one statement, so a connection that no longer holds the name is never
killed (KILL 0 fails with 1094). Servers that refuse an expression in KILL fall back to a
check followed by `KILL CONNECTION id`, which leaves a window of one round trip in which the
holder could release the name (it would then be killed although it holds the name no more).
The connection id is validated as an int and passed as a parameter that PyMySQL renders as
an integer literal.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from datetime import UTC, timedelta
from typing import Any, Literal

from lockconsole.backends import sqlfiles
from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.connect import Timeouts, close_quietly, connect_mysql, first_line
from lockconsole.backends.errors import classify
from lockconsole.backends.inspect import (
    HolderList,
    ReleaseResult,
    ReleaseStatus,
    audited_release,
)
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job
from lockconsole.model.views import Holder

Source = Literal["performance_schema", "metadata_lock_info", "is_used_lock"]
SOURCE_NAMES: dict[str, str] = {
    "performance_schema": "performance_schema.metadata_locks",
    "metadata_lock_info": "information_schema.METADATA_LOCK_INFO",
    "is_used_lock": "IS_USED_LOCK",
}
_QUERIES = {
    "performance_schema": "select_mysql_holders_psmdl",
    "metadata_lock_info": "select_mysql_holders_mli",
    "is_used_lock": "select_mysql_holders_used",
}
READ_TIMEOUT = 30  # seconds
RELEASE_WAIT = 5.0  # seconds to wait for a killed connection to let go of its locks
HIDDEN_WITHOUT_PROCESS = "user, host and query hidden: grant PROCESS"
MAX_QUERY = 1000  # characters of a holder's current statement kept
_GET_LOCK = re.compile(r"get_lock\s*\(\s*(?:_\w+\s*)?'((?:[^'\\]|\\.|'')*)'", re.I | re.S)
_NO_EXPRESSION_IN_KILL = {1064, 1204, 1235}  # parse error, "constants only", "not supported"


class MysqlInspector:
    """Holders of GET_LOCK names on one MySQL/MariaDB server, and a guarded KILL CONNECTION."""

    def __init__(
        self, database: Database, *, source: Source | None = None, timeouts: Timeouts | None = None
    ) -> None:
        if source is not None and source not in SOURCE_NAMES:
            raise ValueError(f"unknown MySQL holder source {source!r}")
        self.database = database
        self._forced = source
        self._source: Source | None = source
        self._notes: tuple[str, ...] = ()
        self._mariadb = True
        self._has_process = True
        self._probed = False
        self._conn: Any = None
        self.timeouts = timeouts  # None: READ_TIMEOUT and connect_mysql's connect timeout

    # -- connection -----------------------------------------------------------------------

    def _connection(self) -> Any:
        """The inspector's own connection, reopened when the server dropped it."""
        import pymysql

        if self._conn is not None:
            try:
                self._conn.ping()
            except (pymysql.MySQLError, OSError):
                self.close()
        if self._conn is None:
            limits = self.timeouts.mysql_params() if self.timeouts else {}
            limits = limits or {"read_timeout": READ_TIMEOUT}
            self._conn = connect_mysql(self.database.url, **limits)
        return self._conn

    def _run(self, query: str, params: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Rows of one statement from the queries folder, as dicts."""
        with self._connection().cursor() as cur:
            cur.execute(sqlfiles.load(query), params)
            names = [d[0] for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def _error(self, what: str, exc: BaseException) -> DatabaseError:
        """A one-line DatabaseError naming the masked URL."""
        return DatabaseError(f"{self.database.url.masked}: {what}: {self._describe(exc)}")

    # -- source detection -----------------------------------------------------------------

    def _detect(self) -> None:
        """Pick the best readable source once, and note what would give a better one."""
        import pymysql

        server = self._run("inspector_facts_mysql")[0]
        self._mariadb = "mariadb" in str(server["version"]).lower()
        self._has_process = bool(server["has_process"])
        notes: list[str] = []
        if not self._has_process:
            notes.append(
                "other accounts' sessions are hidden (user, host, query, waiters): grant PROCESS"
            )
        self._probed = True
        if self._forced is not None:
            self._notes = (*notes, f"source forced to {SOURCE_NAMES[self._forced]}")
            return
        better = self._probe_psmdl(bool(server["performance_schema"]))
        if better is None:
            self._source = "performance_schema"
            self._notes = tuple(notes)
            return
        notes.append(better)
        if self._mariadb:
            try:
                self._run("probe_metadata_lock_info_mysql")
            except pymysql.MySQLError:
                notes.append(
                    "only configured job names are checked and waiters are not shown: "
                    "install the metadata_lock_info plugin: "
                    "INSTALL SONAME 'metadata_lock_info'"
                )
            else:
                self._source = "metadata_lock_info"
                self._notes = tuple(notes)
                return
        else:
            notes.append("only configured job names are checked and waiters are not shown")
        self._source = "is_used_lock"
        self._notes = tuple(notes)

    def _probe_psmdl(self, enabled: bool) -> str | None:
        """None when performance_schema.metadata_locks is usable, else what to change."""
        import pymysql

        if not enabled:
            return (
                "performance_schema is OFF: set performance_schema=ON and "
                "performance-schema-instrument='wait/lock/metadata/sql/mdl=ON' in the "
                "server config to see every holder and waiter"
            )
        try:
            row = self._run("probe_performance_schema_mysql")[0]
        except pymysql.MySQLError as exc:
            if classify(exc) == "denied":
                return "grant SELECT ON performance_schema.* to see every holder and waiter"
            return f"performance_schema.metadata_locks unreadable: {first_line(exc)}"
        if str(row["mdl_enabled"]).upper() != "YES":
            return (
                "the MDL instrument is off: UPDATE performance_schema.setup_instruments SET "
                "ENABLED = 'YES' WHERE NAME = 'wait/lock/metadata/sql/mdl'"
            )
        return None

    @property
    def source(self) -> str:
        """Display name of the source in use (detects it on first use)."""
        import pymysql

        if not self._probed:
            try:
                self._detect()
            except (pymysql.MySQLError, OSError) as exc:
                raise self._error("detecting the GET_LOCK holder source failed", exc) from None
        return SOURCE_NAMES[self._source or "is_used_lock"]

    # -- holders --------------------------------------------------------------------------

    def holders(self, jobs: Sequence[Job]) -> HolderList:
        """Every user-lock holder (and waiter, where the source shows them), in one query."""
        import pymysql

        names = {
            str(j.key.value): j.name
            for j in jobs
            if j.strategy == "mysql" and j.database == self.database.name and j.key.kind == "name"
        }
        try:
            if not self._probed:
                self._detect()
            source: Source = self._source or "is_used_lock"
            if source == "is_used_lock" and not names:
                rows: list[dict[str, Any]] = []
            else:
                params = {"names": json.dumps(sorted(names))} if source == "is_used_lock" else None
                rows = self._run(_QUERIES[source], params)
        except (pymysql.MySQLError, OSError) as exc:
            if not self._forced:
                self._probed, self._source = False, None  # detect again next time
            raise self._error("listing GET_LOCK holders failed", exc) from None
        holders = self._to_holders(rows, names, SOURCE_NAMES[source])
        return HolderList(holders, SOURCE_NAMES[source], self._notes)

    def _to_holders(
        self, rows: list[dict[str, Any]], names: dict[str, str], source: str
    ) -> tuple[Holder, ...]:
        """Holder values from the common row shape of every source's query."""
        granted_by = {r["lock_name"]: int(r["connection_id"]) for r in rows if r["granted"]}
        return tuple(self._holder(r, names, source, granted_by) for r in rows)

    def _holder(
        self, r: dict[str, Any], names: dict[str, str], source: str, granted_by: dict[str, int]
    ) -> Holder:
        """One row as a Holder; a waiter's holder comes from the query or this snapshot."""
        now = r["now_utc"].replace(tzinfo=UTC)
        granted = bool(r["granted"])
        name = r["lock_name"]
        if name is None:  # a PROCESSLIST waiter: the name is in its statement's text
            match = _GET_LOCK.search(r["info"] or "")
            name = _unquote(match.group(1)) if match else ""
        blocked: tuple[int, ...] = ()
        if not granted:
            holder_id = r["blocked_by"] or granted_by.get(name)
            blocked = (int(holder_id),) if holder_id else ()
        seconds, held_ms, info = r["state_seconds"], r["held_ms"], r["info"]
        since = None if seconds is None else now - timedelta(seconds=int(seconds))
        state = r["command"]
        if state and r["state"]:
            state = f"{state} ({r['state']})"
        return Holder(
            database=self.database.name,
            kind="user_lock",
            key=name,
            key_kind="name",
            granted=granted,
            source=source,
            job=names.get(name),
            datname=r["db"],
            mode=r["lock_mode"],
            waiting_since=None if granted else since,
            blocked_by=blocked,
            pid=int(r["connection_id"]),
            user=r["user_name"],
            client_addr=r["host"],
            state=state,
            state_since=since,
            query=info.strip()[:MAX_QUERY] if info else None,
            held_since=None if held_ms is None else now - timedelta(milliseconds=float(held_ms)),
            hidden=None if r["user_name"] is not None else HIDDEN_WITHOUT_PROCESS,
        )

    # -- release --------------------------------------------------------------------------

    def release(self, holder: Holder, *, actor: Actor, audit: AuditLog) -> ReleaseResult:
        """KILL the holder's connection only if it still holds the name; audited first."""
        pid = holder.pid
        if holder.kind != "user_lock" or holder.database != self.database.name:
            return ReleaseResult("error", "not a user lock of this database", holder)
        if not holder.granted:
            return ReleaseResult("error", "only a granted holder can be released", holder)
        if type(pid) is not int or pid <= 0:
            return ReleaseResult("error", f"invalid connection id {pid!r}", holder)
        target = f"user lock {holder.key!r} held by connection {pid}"
        return audited_release(
            holder, target, lambda: self._kill(holder.key, pid), actor=actor, audit=audit
        )

    def _kill(self, name: str, pid: int) -> tuple[ReleaseStatus, str]:
        """The guarded KILL and its outcome as (status, one-line message)."""
        import pymysql

        params = {"name": name, "id": pid}
        changed = f"holder changed: connection {pid} no longer holds {name!r}; nothing was done"
        try:
            try:
                self._run("kill_connection_if_holder_mysql", params)
            except pymysql.MySQLError as exc:
                if not (exc.args and exc.args[0] in _NO_EXPRESSION_IN_KILL):
                    raise
                if self._holder_of(name) != pid:  # fallback: check, then kill (one round trip)
                    return "holder_changed", changed
                self._run("kill_connection_mysql", {"id": pid})
        except (pymysql.MySQLError, OSError, DatabaseError) as exc:
            code = exc.args[0] if isinstance(exc, pymysql.MySQLError) and exc.args else None
            if code == 1094:  # KILL 0: the guard found another holder (or none)
                return "holder_changed", changed
            if code == 1095:
                need = "CONNECTION ADMIN" if self._mariadb else "CONNECTION_ADMIN (or SUPER)"
                if not self._probed:
                    need = "CONNECTION ADMIN (MariaDB) or CONNECTION_ADMIN/SUPER (MySQL)"
                return "denied", (
                    f"denied: ending another account's connection {pid} needs the {need} privilege"
                )
            return "error", f"KILL CONNECTION {pid} failed: {self._describe(exc)}"
        deadline = time.monotonic() + RELEASE_WAIT
        try:
            while (now := self._holder_of(name)) == pid and time.monotonic() < deadline:
                time.sleep(0.05)
        except (pymysql.MySQLError, OSError, DatabaseError) as exc:
            return "released", (
                f"connection {pid} killed; checking {name!r} afterwards "
                f"failed: {self._describe(exc)}"
            )
        if now == pid:
            return "error", (
                f"KILL CONNECTION {pid} sent, but it still held {name!r} after {RELEASE_WAIT:g} s"
            )
        return "released", f"connection {pid} killed; it no longer holds {name!r}"

    def _holder_of(self, name: str) -> int | None:
        """IS_USED_LOCK(name): the holder's connection id, or None when the name is free."""
        value = next(iter(self._run("select_lock_holder_mysql", {"name": name})[0].values()))
        return None if value is None else int(value)

    def _describe(self, exc: BaseException) -> str:
        """The error's first line with any password scrubbed."""
        return scrub(first_line(exc), self.database.url)

    def close(self) -> None:
        """Close the inspector's connection (idempotent)."""
        conn, self._conn = self._conn, None
        close_quietly(conn)


def _unquote(body: str) -> str:
    """The value of a single-quoted SQL string literal's body ('' and backslash escapes)."""
    escapes = {"n": "\n", "t": "\t", "0": "\0", "r": "\r"}
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch in "\\'" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append(escapes.get(nxt, nxt) if ch == "\\" else "'")
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)
