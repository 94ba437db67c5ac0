"""Is there a connection pooler (PgBouncer, or any TCP proxy) between us and PostgreSQL?

Session-level advisory locks are unsafe behind transaction pooling (PgBouncer marks them "Never"
there): the lock outlives the client on a pooled server connection, the next client inherits it, and
an unlock may land on another server connection. Detection, strongest first:

- the PgBouncer admin console (same host and port, dbname=pgbouncer): SHOW VERSION and
  SHOW POOLS (pool_mode); "not allowed" is itself an answer only PgBouncer gives;
- ports: inet_server_port() differs from the DSN's port, or inet_client_port() differs from
  our socket's local port (any TCP proxy; both are NULL over a Unix socket);
- port 6432, PgBouncer's conventional port, only as a hint.

The admin console speaks only the simple query protocol: it is used with psycopg's
ClientCursor in autocommit mode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.connect import connect_pg, first_line, local_address, pg_dsn
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, DatabaseURL, Job

PGBOUNCER_PORT = 6432
ADMIN_TIMEOUT = 5  # seconds


@dataclass(frozen=True)
class PoolerInfo:
    """What sits between a PostgreSQL URL and the server, and how we know."""

    detected: bool
    kind: str | None  # "pgbouncer", "proxy" (an unknown TCP proxy), or None
    pool_mode: str | None  # "session", "transaction", "statement", or None when unknown
    evidence: str  # one line for an operator


class _AdminRefused(Exception):
    """The admin console answered, but refused us ("not allowed"): still PgBouncer."""


def _admin_connect(url: DatabaseURL) -> Any:
    """A connection to PgBouncer's admin console at the URL's host and port, or an error."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    conninfo = make_conninfo(pg_dsn(url), dbname="pgbouncer", connect_timeout=ADMIN_TIMEOUT)
    try:
        return psycopg.connect(conninfo, autocommit=True, cursor_factory=psycopg.ClientCursor)
    except psycopg.OperationalError as exc:
        if "not allowed" in str(exc):  # the server's words, without libpq's "connection to..."
            raise _AdminRefused(first_line(exc).rpartition(" failed: ")[2].strip()) from None
        raise


def _show(conn: Any, what: str) -> list[dict[str, Any]]:
    """The rows of an admin-console SHOW command, as dicts by column name."""
    cur = conn.execute(sqlfiles.load(f"show_pgbouncer_{what}"))
    names = [d.name for d in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _pool_mode(conn: Any, url: DatabaseURL) -> str | None:
    """The pool_mode of the URL's pool (SHOW POOLS), else the configured default."""
    rows = _show(conn, "pools")
    for row in rows:
        if row.get("database") == url.database and (url.user is None or row["user"] == url.user):
            return str(row.get("pool_mode") or "") or None
    for row in _show(conn, "config"):
        if row.get("key") == "pool_mode":
            return str(row.get("value")) or None
    return None


def _probe_admin(url: DatabaseURL) -> tuple[str | None, str | None, str]:
    """(kind, pool_mode, evidence) from the admin console; kind None if it is not PgBouncer."""
    import psycopg

    try:
        conn = _admin_connect(url)
    except _AdminRefused as exc:
        return "pgbouncer", None, f"the admin console refused us ({exc}), which only PgBouncer does"
    except psycopg.Error as exc:
        text = first_line(exc)
        if 'database "pgbouncer" does not exist' in text:
            return None, None, "dbname=pgbouncer is answered by PostgreSQL itself"
        return None, None, f"no admin console ({text})"
    try:
        version = str(_show(conn, "version")[0]["version"])
        mode = _pool_mode(conn, url)
    except psycopg.Error as exc:
        return "pgbouncer", None, f"admin console answered but SHOW failed ({first_line(exc)})"
    finally:
        conn.close()
    return "pgbouncer", mode, f"admin console: {version}, pool_mode {mode or 'unknown'}"


def _ports(url: DatabaseURL) -> list[str]:
    """Port mismatches that give a proxy away (empty for a direct connection)."""
    conn = connect_pg(url, application_name="lockconsole:pooler-check")
    try:
        row = conn.execute(sqlfiles.load("select_pooler_ports")).fetchone()
        if row is None:  # one SELECT of two functions always answers one row
            raise DatabaseError(f"{url.masked}: the pooler port check returned no row")
        server_port, client_port = row
        dsn_port = int(conn.info.port)
        local = local_address(conn)
    finally:
        conn.close()
    found: list[str] = []
    if local is None:
        return found  # a Unix socket to us: ports say nothing
    if server_port is None:
        found.append("we connect over TCP but the server sees a Unix-socket client")
        return found
    if server_port != dsn_port:
        found.append(f"inet_server_port() {server_port} != DSN port {dsn_port}")
    if client_port != local[1]:
        found.append(f"inet_client_port() {client_port} != our local port {local[1]}")
    return found


def detect_pooler(url: DatabaseURL) -> PoolerInfo:
    """Look for a pooler in front of a PostgreSQL URL; DatabaseError if it is unreachable."""
    mismatches = _ports(url)
    kind, mode, admin = _probe_admin(url)
    evidence = "; ".join([*mismatches, admin])
    if kind is None and mismatches:
        kind = "proxy"
        if url.port == PGBOUNCER_PORT:
            evidence += f"; port {PGBOUNCER_PORT} is PgBouncer's conventional port"
    if kind is None:
        hint = f" (although port {PGBOUNCER_PORT} is PgBouncer's)" if url.port == 6432 else ""
        return PoolerInfo(False, None, None, f"direct connection{hint}: {evidence}")
    return PoolerInfo(True, kind, mode, evidence)


def pooler_warnings(jobs: Sequence[Job], database: Database, info: PoolerInfo) -> list[str]:
    """One warning for each pg-session job of `database` that a pooler makes unsafe."""
    if not info.detected or info.pool_mode == "session":
        return []
    what = info.kind or "a pooler"
    out: list[str] = []
    for job in jobs:
        if job.database != database.name or job.strategy != "pg-session":
            continue
        if info.pool_mode in ("transaction", "statement"):
            where = f"{what} in {info.pool_mode} pooling"
        else:
            where = f"{what} of unknown pool mode"
        allowed = " (runs anyway: allow_pooler = true)" if job.allow_pooler else ""
        out.append(
            f"job {job.name!r} uses pg-session behind {where} at {database.url.masked}{allowed}: "
            "a session lock can outlive its client, pass to the next client and be unlocked on "
            'another server connection; use strategy = "pg-xact" (or connect directly)'
        )
    return out


CONSOLE_APPLICATION_PREFIX = "lockconsole:console"  # the console's inspector and ledger reads


def orphaned_server_pids(url: DatabaseURL) -> set[int] | None:
    """PostgreSQL pids of PgBouncer server connections no client is linked to; None if unknown.

    A session lock on such a backend belongs to nobody: it outlived the client that took it.
    Under transaction pooling an idle server connection is never linked, so this is every idle
    server of the URL's database; intersect it with the lock holders.
    """
    import psycopg

    try:
        conn = _admin_connect(url)
    except (_AdminRefused, psycopg.Error):
        return None
    try:
        clients = _show(conn, "clients")
        servers = _show(conn, "servers")
    except psycopg.Error:
        return None
    finally:
        conn.close()
    # a server lent for an instant to the console's own query still belongs to nobody
    ours = {c["ptr"] for c in clients if _is_console(c.get("application_name"))}
    linked = {c["link"] for c in clients if c.get("link") and c.get("ptr") not in ours}
    return {
        int(s["remote_pid"])
        for s in servers
        if s.get("remote_pid")
        and (not s.get("link") or s.get("link") in ours)
        and s.get("ptr") not in linked
        and (url.database is None or s.get("database") == url.database)
    }


def _is_console(application_name: object) -> bool:
    """Whether a PgBouncer client is one of the console's own connections."""
    return str(application_name or "").startswith(CONSOLE_APPLICATION_PREFIX)
