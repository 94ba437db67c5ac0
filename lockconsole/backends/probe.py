"""What `lockconsole init` learns from a database before writing a starter configuration.

The server's kind and version, a pooler in front (PostgreSQL), the locks held right now (to map
to jobs), ShedLock-shaped tables, and whether this account may see other sessions and end them,
with the grants it lacks. Read-only: nothing is created or changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lockconsole.backends.connect import connect_mysql, connect_pg, first_line
from lockconsole.backends.inspect import HolderList
from lockconsole.backends.sqlfiles import load
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, DatabaseURL
from lockconsole.model.views import Holder

if TYPE_CHECKING:
    from lockconsole.backends.postgres.pooler import PoolerInfo

APPLICATION_NAME = "lockconsole:init"


@dataclass(frozen=True)
class Probe:
    """One database as `lockconsole init` found it."""

    dialect: str  # "postgresql" or "mysql"
    server: str  # "PostgreSQL 15.18", "MariaDB 10.11.19-MariaDB-0+deb12u1"
    user: str
    pooler: PoolerInfo | None  # PostgreSQL only
    holders: tuple[Holder, ...]  # locks held (and waited for) right now
    lease_tables: tuple[str, ...]  # ShedLock-shaped tables, schema-qualified
    view_grant: str | None  # the grant that would let this account see other sessions
    release_grant: str | None  # the grant that would let it end other sessions
    notes: tuple[str, ...] = ()  # what else the inspector says privileges or setup hide


def probe(url: DatabaseURL) -> Probe:
    """Probe a PostgreSQL or MySQL/MariaDB URL; DatabaseError when it cannot be reached."""
    if url.dialect == "postgresql":
        return _probe_pg(url)
    if url.dialect == "mysql":
        return _probe_mysql(url)
    raise DatabaseError(f"{url.masked}: init probes PostgreSQL and MySQL/MariaDB URLs only")


def _rows(conn: Any, name: str, dialect: str) -> list[dict[str, Any]]:
    with conn.cursor() as cur:
        cur.execute(load(name, dialect))
        columns = [d[0] for d in cur.description]
        return [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]


def _probe_pg(url: DatabaseURL) -> Probe:
    import psycopg

    from lockconsole.backends.postgres.inspect import PgInspector
    from lockconsole.backends.postgres.pooler import detect_pooler

    conn = connect_pg(url, application_name=APPLICATION_NAME)
    try:
        server = _rows(conn, "probe_account", "postgresql")[0]
        tables = _rows(conn, "select_lease_tables", "postgresql")
    except psycopg.Error as exc:
        raise DatabaseError(f"{url.masked}: {scrub(first_line(exc), url)}") from None
    finally:
        conn.close()
    inspector = PgInspector(Database("init", url), application_name=APPLICATION_NAME)
    try:
        listed = inspector.holders([])
    finally:
        inspector.close()
    user, superuser = str(server["usename"]), bool(server["superuser"])
    stats, signal = bool(server["read_all_stats"]), bool(server["signal_backend"])
    view = None if superuser or stats else f"GRANT pg_read_all_stats TO {user};"
    release = None
    if not superuser:
        wanted = (("pg_signal_backend", signal), ("pg_read_all_stats", stats))
        missing = [role for role, has in wanted if not has]
        release = f"GRANT {', '.join(missing)} TO {user};" if missing else None
    return Probe(
        dialect="postgresql",
        server=f"PostgreSQL {server['version']}",
        user=user,
        pooler=detect_pooler(url),
        holders=tuple(listed.holders),
        lease_tables=tuple(_qualified(t, "public") for t in tables),
        view_grant=view,
        release_grant=release,
        notes=_notes(listed),
    )


def _probe_mysql(url: DatabaseURL) -> Probe:
    import pymysql

    from lockconsole.backends.mysql.inspect import MysqlInspector

    conn = connect_mysql(url)
    try:
        server = _rows(conn, "probe_account", "mysql")[0]
        tables = _rows(conn, "select_lease_tables", "mysql")
    except pymysql.MySQLError as exc:
        raise DatabaseError(f"{url.masked}: {scrub(first_line(exc), url)}") from None
    finally:
        conn.close()
    inspector = MysqlInspector(Database("init", url))
    try:
        listed = inspector.holders([])
    finally:
        inspector.close()
    version = str(server["version"])
    mariadb = "mariadb" in version.lower()
    user, host = _account(str(server["usename"]))
    granted = set(str(server["privileges"] or "").split(","))
    view = None if "PROCESS" in granted else f"GRANT PROCESS ON *.* TO '{user}'@'{host}';"
    admin = "CONNECTION ADMIN" if mariadb else "CONNECTION_ADMIN"
    can_end = granted & {"SUPER", "CONNECTION ADMIN", "CONNECTION_ADMIN"}
    release = None if can_end else f"GRANT {admin} ON *.* TO '{user}'@'{host}';"
    return Probe(
        dialect="mysql",
        server=f"{'MariaDB' if mariadb else 'MySQL'} {version}",
        user=f"{user}@{host}",
        pooler=None,
        holders=tuple(listed.holders),
        lease_tables=tuple(_qualified(t, str(server["datname"] or "")) for t in tables),
        view_grant=view,
        release_grant=release,
        notes=_notes(listed),
    )


def _notes(listed: HolderList) -> tuple[str, ...]:
    """The inspector's notes, and what privileges hide of the holders (each once)."""
    hidden = [h.hidden for h in listed.holders if h.hidden]
    return tuple(dict.fromkeys((*listed.notes, *hidden)))


def _account(current_user: str) -> tuple[str, str]:
    """CURRENT_USER()'s 'name@host' as (name, host)."""
    name, _, host = current_user.rpartition("@")
    return name, host


def _qualified(row: dict[str, Any], default_schema: str) -> str:
    """A table's name, with its schema when that is not the default one."""
    schema, table = str(row["table_schema"]), str(row["table_name"])
    return table if schema == default_schema else f"{schema}.{table}"
