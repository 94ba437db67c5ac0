"""Real servers, real processes and the outside tools: the test PostgreSQL and MariaDB, Redis
and PgBouncer servers of the tests' own, `lockconsole` subprocesses, promtool, systemd-analyze,
tmux and pip. The server fixtures themselves are the whole suite's (tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def dialect_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The test PostgreSQL, the test MariaDB/MySQL, then a fresh SQLite file: one test each."""
    if request.param == "postgresql":
        return str(request.getfixturevalue("pg_url"))
    if request.param == "mysql":
        return str(request.getfixturevalue("mysql_url"))
    return f"sqlite:///{tmp_path / 'test.db'}"


@pytest.fixture
def empty_registry() -> Iterator[None]:
    """No kept run_once sessions before or after the test (lockconsole.engine.sessions.REGISTRY)."""
    from lockconsole.engine.sessions import REGISTRY

    REGISTRY.close_all()
    yield
    REGISTRY.close_all()


@pytest.fixture
def mysql_proxy(mysql_url: str) -> Iterator[tuple[Any, str]]:
    """A counting TCP proxy in front of the test MariaDB, and the URL through it; the kept
    run_once sessions are closed before the proxy."""
    from lockconsole.engine.sessions import REGISTRY

    from tests.support.tcp_proxy import CountingProxy, proxied

    counting, url = proxied(mysql_url, 3306, CountingProxy)
    yield counting, url
    REGISTRY.close_all()
    counting.close()
