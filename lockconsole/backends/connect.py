"""Open dedicated, unpooled connections with the raw drivers (the run path avoids SQLAlchemy)."""

from __future__ import annotations

import sqlite3
from typing import Any

from ..errors import DatabaseError
from ..models import DatabaseURL
from ..urls import scrub

CONNECT_TIMEOUT = 10  # seconds


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
) -> Any:
    """A psycopg connection of its own; prepare_threshold=None so a pooler in front is safe."""
    import psycopg

    try:
        return psycopg.connect(
            pg_dsn(url),
            autocommit=autocommit,
            prepare_threshold=None,
            application_name=application_name,
            connect_timeout=connect_timeout,
        )
    except psycopg.Error as exc:
        raise DatabaseError(f"{url.masked}: {scrub(first_line(exc), url)}") from None


def connect_mysql(
    url: DatabaseURL, *, connect_timeout: int = CONNECT_TIMEOUT, read_timeout: int | None = None
) -> Any:
    """A PyMySQL connection of its own, autocommit on."""
    import pymysql

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
    if read_timeout:
        kwargs["read_timeout"] = read_timeout
    if "unix_socket" in query:
        kwargs["unix_socket"] = query["unix_socket"]
    try:
        return pymysql.connect(**kwargs)
    except pymysql.MySQLError as exc:
        raise DatabaseError(f"{url.masked}: {scrub(first_line(exc), url)}") from None


def connect_sqlite(url: DatabaseURL) -> sqlite3.Connection:
    try:
        conn = sqlite3.connect(url.database or ":memory:", isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise DatabaseError(f"{url.masked}: {exc}") from None
    return conn


def connect(url: DatabaseURL, *, application_name: str = "lockconsole") -> Any:
    """A raw DB-API connection in autocommit mode, for whichever dialect the URL names."""
    if url.dialect == "postgresql":
        return connect_pg(url, application_name=application_name)
    if url.dialect == "mysql":
        return connect_mysql(url)
    return connect_sqlite(url)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
