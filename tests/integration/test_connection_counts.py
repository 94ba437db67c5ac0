"""How many connections each kind of lockconsole process holds, counted by the server
(pg_stat_activity, MariaDB's processlist) in a database of the test's own, so the README's
sizing table is a measurement: a `run` per strategy while its job runs, `schedule` while idle and
while it serves a request, the metrics exporter after a scrape and the console after a refresh."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp

from tests.support.helpers import eventually, mysql_connect, settle, sync

# the job: say it started, then wait for the test's "go" (a barrier, not a sleep of the test's)
WAITER = (
    "import pathlib, sys, time\n"
    "pathlib.Path(sys.argv[1]).touch()\n"
    "while not pathlib.Path(sys.argv[2]).exists():\n"
    "    time.sleep(0.02)\n"
)


@pytest.fixture
def own_pg(pg_url: str, uid: str) -> Iterator[str]:
    """A fresh PostgreSQL database: every session in it is the process under test's."""
    name = f"lc_conn_{uid}"
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield pg_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def pg_sessions(url: str) -> list[str]:
    """The application names of every other session in `url`'s database."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


def start(config: Path, *words: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip


def waiter_job(tmp_path: Path, name: str) -> tuple[str, Path, Path]:
    script, started, go = tmp_path / "wait.py", tmp_path / "started", tmp_path / "go"
    script.write_text(WAITER, encoding="utf-8")
    command = f'command = ["{sys.executable}", "{script}", "{started}", "{go}"]'
    return command, started, go


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [("pg-session", 1), ("pg-xact", 2), ("lease", 1)],
)
def test_run_holds_what_the_sizing_table_says_on_postgresql(
    own_pg, uid, write_config, cli_env, tmp_path, strategy, expected
):
    command, started, go = waiter_job(tmp_path, "wait")
    config = write_config(
        f'[databases.main]\nurl = "{own_pg}"\n[jobs.j_{uid}]\nstrategy = "{strategy}"\n{command}\n'
    )
    go.touch()  # a first attempt makes the ledger's tables: the table counts a steady attempt
    first = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", f"j_{uid}",
         "--slot", "2026-01-01T00:00:00+00:00"],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    go.unlink()
    started.unlink()
    proc = start(config, "run", f"j_{uid}", env=cli_env)
    try:
        eventually(started.exists, timeout=60)
        assert len(pg_sessions(own_pg)) == expected, pg_sessions(own_pg)
    finally:
        go.touch()
        assert proc.wait(timeout=60) == 0, proc.communicate()[1]


@pytest.mark.mysql
def test_run_holds_one_connection_on_mariadb(mysql_url, uid, write_config, cli_env, tmp_path):
    name = f"lc_conn_{uid}"
    admin = mysql_connect(mysql_url)
    with admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    own = mysql_url.rsplit("/", 1)[0] + "/" + name
    command, started, go = waiter_job(tmp_path, "wait")
    config = write_config(
        f'[databases.main]\nurl = "{own}"\n[jobs.j_{uid}]\nstrategy = "mysql"\n{command}\n'
    )
    proc = start(config, "run", f"j_{uid}", env=cli_env)
    try:
        eventually(started.exists, timeout=60)
        with admin.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.processlist WHERE db = %s", (name,)
            )
            assert cur.fetchone()[0] == 1
    finally:
        go.touch()
        assert proc.wait(timeout=60) == 0, proc.communicate()[1]
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE `{name}`")
        admin.close()


def test_schedule_holds_a_request_connection_a_listen_and_its_journal_sampler(
    own_pg, uid, write_config, cli_env, tmp_path
):
    command, started, go = waiter_job(tmp_path, "wait")
    config = write_config(
        f'[databases.main]\nurl = "{own_pg}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
        f'schedule = "0 2 * * *"\n{command}\n'
    )
    proc = start(config, "schedule", "--instance", "s1", env=cli_env)
    try:
        # idle: the request server's ledger connection and its LISTEN, and the holder
        # journal's sampler (its holders read and its journal write), nothing else (the ledger
        # tables are made on a fresh database on the way: that connection must not stay)
        idle = [
            "lockconsole:console",
            "lockconsole:journal",
            "lockconsole:requests",
            "lockconsole:requests",
        ]
        eventually(lambda: pg_sessions(own_pg) == idle, timeout=60)
        done = subprocess.run(
            [sys.executable, "-m", "lockconsole", "--config", str(config),
             "request", f"j_{uid}", "--no-wait"],
            env=cli_env, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        eventually(started.exists, timeout=60)
        # serving it: the attempt's one lock-and-ledger connection; the request's row is noted
        # on the request server's own connection
        sessions = pg_sessions(own_pg)
        assert sessions.count("lockconsole:requests") == 2, sessions
        assert len(sessions) == 5, sessions
        go.touch()
        eventually(lambda: len(pg_sessions(own_pg)) == 4, timeout=60)
        assert pg_sessions(own_pg) == idle  # the attempt's connection closed with it
    finally:
        go.touch()
        proc.terminate()
        proc.wait(timeout=60)


def test_the_exporter_holds_an_inspector_and_a_ledger_connection(
    own_pg, uid, write_config, cli_env
):
    config = write_config(
        f'[databases.main]\nurl = "{own_pg}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
    )
    proc = start(config, "metrics", "--listen", "127.0.0.1:0", env=cli_env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()  # "serving metrics on http://HOST:PORT/metrics"
        address = line.split("http://", 1)[1].split()[0]
        for _ in range(2):
            with urllib.request.urlopen(f"http://{address}", timeout=30) as answer:
                assert answer.status == 200
        assert pg_sessions(own_pg) == ["lockconsole:console", "lockconsole:console-ledger"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


@sync
async def test_the_console_holds_an_inspector_and_a_ledger_connection(own_pg, uid):
    config = parse_config(
        f'[databases.main]\nurl = "{own_pg}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
    )
    console = Console(config)
    try:
        app = LockConsoleApp(console)
        async with app.run_test(size=(100, 30)) as pilot:
            await settle(app, pilot)
            app.refresh_now()
            await settle(app, pilot)
            assert pg_sessions(own_pg) == ["lockconsole:console", "lockconsole:console-ledger"]
    finally:
        console.close()


def test_run_of_a_redis_job_holds_one_redis_and_one_ledger_connection(
    own_pg, private_redis, uid, write_config, cli_env, tmp_path
):
    """The lock on a Redis server of the test's own (every client there is the run's, but the
    one counting), the ledger (and its fencing tokens) in a PostgreSQL database of its own."""
    import redis

    command, started, go = waiter_job(tmp_path, "wait")
    config = write_config(
        f'[lockconsole]\nledger_database = "ledger"\n'
        f'[databases.cache]\nurl = "{private_redis.url}"\n'
        f'[databases.ledger]\nurl = "{own_pg}"\n'
        f'[jobs.j_{uid}]\ndatabase = "cache"\nstrategy = "redis"\n{command}\n'
    )
    go.touch()  # a first attempt makes the ledger's tables: the table counts a steady attempt
    first = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", f"j_{uid}",
         "--slot", "2026-01-01T00:00:00+00:00"],
        env=cli_env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    go.unlink()
    started.unlink()
    counter = redis.Redis.from_url(private_redis.url)
    proc = start(config, "run", f"j_{uid}", env=cli_env)
    try:
        eventually(started.exists, timeout=60)
        clients = [c for c in counter.client_list() if int(c["id"]) != counter.client_id()]
        assert len(clients) == 1, clients
        assert len(pg_sessions(own_pg)) == 1, pg_sessions(own_pg)
    finally:
        go.touch()
        assert proc.wait(timeout=60) == 0, proc.communicate()[1]
        counter.close()
