"""Open dedicated, unpooled connections with the raw drivers (the run path avoids SQLAlchemy)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol

from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import DatabaseURL

if TYPE_CHECKING:
    import sqlite3

    from psycopg import Connection as PgConnection
    from psycopg.rows import TupleRow
    from pymysql.connections import Connection as MysqlConnection
    from pymysql.cursors import Cursor

CONNECT_TIMEOUT = 10  # seconds
# PyMySQL bounds only the TCP connect by connect_timeout: the server's greeting, and every
# statement, wait as long as read_timeout says, forever by default. A peer that accepts and never
# answers (a hung server, a proxy) must not hang a command: this bounds what no caller bounds.
MYSQL_IO_TIMEOUT = 60  # seconds
_UNSUPPORTED_OPTIONS = "unsupported startup parameter"  # PgBouncer without options ignored
PREPARE_THRESHOLD = 5  # psycopg's default: a statement run this often on a connection is prepared


@dataclass(frozen=True)
class Timeouts:
    """The console's limits (seconds): connecting, and one statement (server and socket side).

    Applied to every console connection so a stopped or silent database fails within about
    `connect + statement` seconds instead of hanging a worker thread.
    """

    connect: float = 5.0
    statement: float = 5.0

    def pg_params(self) -> dict[str, Any]:
        """libpq parameters: a server-side statement_timeout, and TCP keepalives and
        tcp_user_timeout so a peer that went away without a word is noticed (TCP only)."""
        statement_ms = max(1, round(self.statement * 1000))
        return {
            "connect_timeout": max(2, round(self.connect)),  # libpq: whole seconds, >= 2
            "options": f"-c statement_timeout={statement_ms}",
            "keepalives": 1,
            "keepalives_idle": max(1, round(self.statement)),
            "keepalives_interval": 1,
            "keepalives_count": 3,
            "tcp_user_timeout": round((self.connect + self.statement) * 1000),
        }

    def mysql_params(self) -> dict[str, Any]:
        """PyMySQL socket timeouts (the handshake is read under read_timeout too)."""
        wait = self.statement + 1.0  # a little over the statement budget
        return {"connect_timeout": self.connect, "read_timeout": wait, "write_timeout": wait}


def pg_connect_params(psycopg: ModuleType, conninfo: str, **params: Any) -> PgConnection[TupleRow]:
    """psycopg.connect, retried once without `options` when a pooler refuses that parameter."""
    try:
        return psycopg.connect(conninfo, **params)
    except psycopg.OperationalError as exc:
        if "options" not in params or _UNSUPPORTED_OPTIONS not in str(exc):
            raise
    params = {k: v for k, v in params.items() if k != "options"}
    return psycopg.connect(conninfo, **params)


def pg_dsn(url: DatabaseURL) -> str:
    """The URL in the form psycopg accepts (no SQLAlchemy driver suffix)."""
    raw = url.raw
    scheme, rest = raw.split("://", 1)
    return "postgresql://" + rest if scheme != "postgresql" else raw


def connect_pg(
    url: DatabaseURL,
    *,
    application_name: str = "lockconsole",
    autocommit: bool = True,
    connect_timeout: int = CONNECT_TIMEOUT,
    timeouts: Timeouts | None = None,
) -> PgConnection[TupleRow]:
    """A psycopg connection of its own; prepare_threshold=None so a pooler in front is safe.

    `timeouts` (the console's) replaces connect_timeout and adds statement_timeout and TCP
    keepalives (see Timeouts.pg_params).
    """
    import psycopg

    params: dict[str, Any] = {"connect_timeout": connect_timeout}
    if timeouts is not None:
        params = timeouts.pg_params()
    try:
        return pg_connect_params(
            psycopg,
            pg_dsn(url),
            autocommit=autocommit,
            prepare_threshold=None,
            application_name=application_name,
            **params,
        )
    except psycopg.Error as exc:
        text = scrub(first_line(exc), url)
        raise DatabaseError(f"{url.masked}: {text}{too_many_hint(text, url)}") from None


def local_address(conn: PgConnection[Any]) -> tuple[Any, ...] | None:
    """Our end of a psycopg connection's TCP socket, (host, port, ...); None over a Unix socket."""
    try:
        with socket.socket(fileno=os.dup(conn.fileno())) as sock:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                return sock.getsockname()
    except (OSError, ValueError):
        pass
    return None


def prepare_if_direct(
    conn: PgConnection[Any], server_port: int | None, client_port: int | None
) -> bool:
    """Prepare the statements a kept connection repeats, once it is known direct.

    Our connections open with prepare_threshold=None: transaction pooling breaks named prepared
    statements ("prepared statement _pg3_0 already exists"). A connection is direct when the server
    saw the port we dialled (inet_server_port()) and our socket's own port (inet_client_port()): a
    pooler or TCP proxy in between shows other ports. Over a Unix socket both are NULL and PgBouncer
    cannot be ruled out, so such a connection stays unprepared. A direct connection's run-path
    statements are prepared by its Wire (backends/postgres/wire.py), which owns its prepared
    statements: psycopg's would be dropped with DEALLOCATE ALL after any rollback, and ours with
    them. True if preparing was enabled.
    """
    from lockconsole.backends.postgres.wire import mark_direct, wire_for

    if server_port is None or client_port is None or wire_for(conn).direct:
        return False
    local = local_address(conn)
    try:
        dialled = int(conn.info.port)
    except (TypeError, ValueError):
        return False
    if local is None or local[1] != client_port or dialled != server_port:
        return False
    mark_direct(conn)
    return True


def connect_mysql(
    url: DatabaseURL,
    *,
    connect_timeout: float = CONNECT_TIMEOUT,
    read_timeout: float | None = None,
    write_timeout: float | None = None,
    multi_statements: bool = False,
) -> MysqlConnection[Cursor]:
    """A PyMySQL connection of its own, autocommit on (and, if asked, several statements
    allowed per call)."""
    import pymysql

    from lockconsole.config.mysql_params import driver_options

    query = dict(url.query)
    kwargs: dict[str, Any] = {
        "host": url.host or "localhost",
        "port": url.port or 3306,
        "user": url.user or "root",
        "password": url.password or "",
        "database": url.database,
        "autocommit": True,
        "connect_timeout": connect_timeout,
        "charset": query.get("charset", "utf8mb4"),
    }
    kwargs["read_timeout"] = read_timeout or MYSQL_IO_TIMEOUT
    kwargs["write_timeout"] = write_timeout or MYSQL_IO_TIMEOUT
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"]
    kwargs.update(driver_options(url.query))  # TLS and option files (config/mysql_params.py)
    if multi_statements:
        from pymysql.constants import CLIENT

        kwargs["client_flag"] = CLIENT.MULTI_STATEMENTS
    try:
        return pymysql.connect(**kwargs)
    except pymysql.MySQLError as exc:
        text = scrub(first_line(exc), url)
        raise DatabaseError(f"{url.masked}: {text}{too_many_hint(text, url)}") from None


def connect_sqlite(url: DatabaseURL) -> sqlite3.Connection:
    import sqlite3  # not at the top: the run path on PostgreSQL or MySQL never needs it

    try:
        conn = sqlite3.connect(url.database or ":memory:", isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise DatabaseError(f"{url.masked}: {exc}") from None
    return conn


def connect(
    url: DatabaseURL, *, application_name: str = "lockconsole", timeouts: Timeouts | None = None
) -> Any:
    """A raw DB-API connection in autocommit mode, for whichever dialect the URL names
    (`timeouts`, the console's, bound a MySQL connection's handshake and statements too)."""
    if url.dialect == "postgresql":
        return connect_pg(url, application_name=application_name)
    if url.dialect == "mysql":
        return connect_mysql(url, **(timeouts.mysql_params() if timeouts else {}))
    return connect_sqlite(url)


# A server (or PgBouncer) out of connections says one of these.
TOO_MANY = (
    "too many clients",  # PostgreSQL: max_connections reached
    "too many connections",  # PostgreSQL: a role's or database's limit; MySQL: 1040
    "remaining connection slots are reserved",  # PostgreSQL: only reserved slots left
    "no more connections allowed",  # PgBouncer: max_client_conn reached
)


def too_many_hint(text: str, url: DatabaseURL) -> str:
    """What to do when the server is out of connections, to follow its error; else ""."""
    if not any(words in text.lower() for words in TOO_MANY):
        return ""
    held = " -- every instance holds its connections for the whole attempt: "
    if url.dialect == "postgresql":
        return (
            f'{held}put PgBouncer (transaction pooling) in front and use strategy = "pg-xact",'
            " or have fewer instances connect directly (README: Sizing connections)"
        )
    return (
        f"{held}have fewer instances connect at once, or raise the server's max_connections"
        " (README: Sizing connections)"
    )


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class _Closable(Protocol):
    def close(self) -> None: ...


def close_quietly(conn: _Closable | None) -> None:
    """Close a connection or client being thrown away; an error closing it changes nothing."""
    if conn is not None:
        try:
            conn.close()
        except Exception:
            pass


def socket_fd_of(conn: Any) -> int | None:
    """The file descriptor of a driver connection's socket: psycopg's fileno(), PyMySQL's
    `_sock`; None when it is closed or has no socket of its own (SQLite)."""
    if conn is None:
        return None
    try:
        if hasattr(conn, "fileno"):
            return int(conn.fileno())
        sock = getattr(conn, "_sock", None)
        return None if sock is None else int(sock.fileno())
    except Exception:
        return None


def shut_socket(fd: int | None) -> None:
    """Shut down the socket `fd` both ways without a word to the server: a call blocked on it
    returns with an error. The descriptor itself stays open for its owner to close."""
    if fd is None:
        return
    try:
        cut = socket.socket(fileno=os.dup(fd))
    except OSError:
        return
    try:
        cut.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        cut.close()
