"""The unit tier (`make test-unit`, `pytest tests/unit`): pure code, no server. Its folders
mirror lockconsole/'s packages; the repository-wide checks (layers, README claims, the CI skip
rule) sit at the top.

A unit test cannot reach a server through a fixture: below, every server fixture of the suite is
replaced, for this folder only, by one that fails the test with where it belongs. pytest
resolves a fixture by the asking test's folder, so this holds for a fixture asked for by name,
through another fixture (pg_conn, own_database, fresh_mysql, url_for, ...) or at run time
(request.getfixturevalue).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

# The servers: the machine's PostgreSQL, MariaDB and Redis, and the ones the tests start
# (embedded PostgreSQL, redis-server, PgBouncer).
SERVER_FIXTURES = (
    "pg_url",
    "mysql_url",
    "own_postgres",
    "redis_server",
    "redis_url",
    "private_redis",
    "pgbouncer",
    "pgbouncer_one_server",
    "pgbouncer_session",
    "dialect_url",
)


def _refused(name: str) -> Callable[[], None]:
    @pytest.fixture(name=name)
    def fixture() -> None:
        pytest.fail(
            f"{name} is a server, and tests/unit reaches no server: the test belongs in "
            "tests/integration (or tests/faults, tests/tui)",
            pytrace=False,
        )

    return fixture


for _name in SERVER_FIXTURES:
    globals()[f"_{_name}_refused"] = _refused(_name)
