"""SQLAlchemy engines for the paths that use SQLAlchemy Core (DDL, leases, reports)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from lockconsole.backends.connect import Timeouts, pg_connect_params
from lockconsole.model.jobs import DatabaseURL

if TYPE_CHECKING:
    from sqlalchemy import Engine
    from sqlalchemy.engine import URL

_MYSQL_QUERY = ("charset", "unix_socket")
_DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "sqlite": "sqlite"}
_DIALECT_MODULES = {
    "postgresql": "sqlalchemy.dialects.postgresql.psycopg",
    "mysql": "sqlalchemy.dialects.mysql.pymysql",
    "sqlite": "sqlalchemy.dialects.sqlite.pysqlite",
}


def import_first(dialects: Iterable[str], *modules: str) -> None:
    """Import SQLAlchemy, the dialects named and `modules` in the calling thread.

    SQLAlchemy imports its modules in cycles: two threads importing it for the first time at
    once can fail ("partially initialized module 'sqlalchemy.util' has no attribute
    'MemoizedSlots'", or "deadlock detected by _ModuleLock"). A caller about to start threads
    that use it calls this first; once imported, a second call only looks the modules up.
    """
    import importlib

    importlib.import_module("sqlalchemy")
    for name in sorted({_DIALECT_MODULES[d] for d in dialects if d in _DIALECT_MODULES}):
        importlib.import_module(name)
    for name in modules:
        importlib.import_module(name)


def sa_url(url: DatabaseURL) -> URL:
    """The SQLAlchemy URL object for `url` (render it with hide_password=True only)."""
    from sqlalchemy.engine import URL, make_url

    if url.dialect == "mysql":  # what connect_mysql uses: PyMySQL refuses other keywords
        query = {k: v for k, v in url.query if k in _MYSQL_QUERY}
        return URL.create(
            _DRIVERS["mysql"],
            url.user or "root",
            url.password,
            url.host,
            url.port,
            url.database,
            query,
        )
    rest = url.raw.split("://", 1)[1]
    return make_url(f"{_DRIVERS[url.dialect]}://{rest}")


def engine_for(
    url: DatabaseURL,
    *,
    dedicated: bool = False,
    timeouts: Timeouts | None = None,
    application_name: str | None = None,
    **kwargs: Any,
) -> Engine:
    """An Engine; `dedicated` uses NullPool so a connection holding a lock is never pooled.

    `timeouts` (the console's) bounds connecting and each statement (see connect.Timeouts);
    `application_name` names PostgreSQL sessions.
    """
    from sqlalchemy import create_engine, event
    from sqlalchemy.pool import NullPool

    connect_args: dict[str, Any] = {}
    if url.dialect == "postgresql":
        connect_args = {"prepare_threshold": None, "connect_timeout": 10}
        if timeouts is not None:
            connect_args.update(timeouts.pg_params())
        if application_name:
            connect_args["application_name"] = application_name
    elif url.dialect == "mysql":
        from lockconsole.backends.connect import MYSQL_IO_TIMEOUT
        from lockconsole.config.mysql_params import driver_options

        io = {"read_timeout": MYSQL_IO_TIMEOUT, "write_timeout": MYSQL_IO_TIMEOUT}
        connect_args = {"connect_timeout": 10, **io, **driver_options(url.query)}
        if timeouts is not None:
            connect_args.update(timeouts.mysql_params())
    if dedicated:
        kwargs["poolclass"] = NullPool
    engine = create_engine(sa_url(url), connect_args=connect_args, **kwargs)
    if url.dialect == "postgresql" and timeouts is not None:
        event.listen(engine, "do_connect", _pg_connect)  # retried without options if refused
    return engine


def _pg_connect(dialect: Any, record: Any, cargs: Any, cparams: dict[str, Any]) -> Any:
    import psycopg

    conninfo = cargs[0] if cargs else ""
    return pg_connect_params(psycopg, conninfo, **cparams)


def add_column_ddl(dialect: Any, column: Any) -> str:
    """`ALTER TABLE … ADD COLUMN …` for one column of a SQLAlchemy table, in `dialect`'s SQL.

    SQLAlchemy has no ALTER construct: the column's DDL is compiled from the column itself and
    both names are quoted by the dialect, so no text from outside the model enters the statement.
    """
    from sqlalchemy.schema import CreateColumn

    table = dialect.identifier_preparer.format_table(column.table)
    return f"ALTER TABLE {table} ADD COLUMN {CreateColumn(column).compile(dialect=dialect)}"
