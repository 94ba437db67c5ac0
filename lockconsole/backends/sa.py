"""SQLAlchemy engines for the paths that use SQLAlchemy Core (DDL, leases, reports)."""

from __future__ import annotations

from typing import Any

from ..models import DatabaseURL

_DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql", "sqlite": "sqlite"}


def sa_url(url: DatabaseURL) -> Any:
    """The SQLAlchemy URL object for `url` (render it with hide_password=True only)."""
    from sqlalchemy.engine import make_url

    rest = url.raw.split("://", 1)[1]
    return make_url(f"{_DRIVERS[url.dialect]}://{rest}")


def engine_for(url: DatabaseURL, *, dedicated: bool = False, **kwargs: Any) -> Any:
    """An Engine; `dedicated` uses NullPool so a connection holding a lock is never pooled."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    connect_args: dict[str, Any] = {}
    if url.dialect == "postgresql":
        connect_args = {"prepare_threshold": None, "connect_timeout": 10}
    elif url.dialect == "mysql":
        connect_args = {"connect_timeout": 10}
    if dedicated:
        kwargs["poolclass"] = NullPool
    return create_engine(sa_url(url), connect_args=connect_args, **kwargs)
