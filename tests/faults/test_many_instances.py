"""Many instances at once. Through a real PgBouncer (transaction pooling) with pg-xact, 150
`lockconsole run` processes for one slot are all accounted for: 150 attempts in the ledger and
exactly one run. When the server is out of connections, the one-line error says what to do.

The 150 processes run at most CONCURRENT at a time (a 2-core machine); every one of them
attempts the same slot (--slot), so which one runs does not matter and nothing waits on a
barrier: whatever the interleaving, exactly one gets the lock and the slot, the rest skip.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from psycopg import sql

from lockconsole.config.urls import parse_url

from tests.faults.fault_helpers import job_config, runs_of, worker_env

INSTANCES = 150
CONCURRENT = 16  # processes alive at once, at most
SLOT = "2030-01-01T02:00:00Z"
EXIT_SKIPPED = 3
EXIT_DATABASE = 5


def _attempt(config: Path, job: str, instance: str, marks: Path) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job, "-q"]
        + ["--instance", instance, "--slot", SLOT, "--", "sh", "-c", f"echo ran >> {marks}"],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=300,
    )
    assert done.returncode in (0, EXIT_SKIPPED), (instance, done.returncode, done.stderr)
    return done.returncode


@pytest.mark.slow
def test_150_instances_through_pgbouncer_one_run_every_attempt_recorded(
    pgbouncer: str,
    uid: str,
    tmp_path: Path,
) -> None:
    job = f"many_{uid}"
    config = job_config(tmp_path / "many.toml", pgbouncer, job, "pg-xact")
    marks = tmp_path / "marks"
    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:  # bounds the live processes
        codes = list(
            pool.map(lambda i: _attempt(config, job, f"web-{i:03d}", marks), range(INSTANCES))
        )
    assert Counter(codes) == {0: 1, EXIT_SKIPPED: INSTANCES - 1}
    assert marks.read_text().splitlines() == ["ran"]
    runs = runs_of(config, job)
    assert len(runs) == INSTANCES
    assert len({r.instance for r in runs}) == INSTANCES
    assert Counter(r.outcome for r in runs) == {"succeeded": 1, "skipped": INSTANCES - 1}
    print(f"{INSTANCES} instances, {CONCURRENT} at a time: {Counter(codes)}")


@pytest.fixture
def limited_role(pg_conn, uid: str):
    """A login role whose connection limit is 0: the server refuses it as out of connections."""
    role = f"lc_full_{uid}"
    pg_conn.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 0").format(sql.Identifier(role)))
    yield role
    pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_out_of_connections_says_what_to_do(pg_url: str, limited_role: str, uid, tmp_path) -> None:
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(pg_url)
    url = urlunsplit(parts._replace(netloc=f"{limited_role}@{parts.hostname}:{parts.port}"))
    job = f"full_{uid}"
    config = job_config(tmp_path / "full.toml", url, job, "pg-session")
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job, "--", "true"],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=120,
    )
    assert done.returncode == EXIT_DATABASE, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert "too many connections for role" in line
    assert 'put PgBouncer (transaction pooling) in front and use strategy = "pg-xact"' in line
    assert "or have fewer instances connect directly" in line


COUNT_PG = (
    "SELECT count(*) FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)
COUNT_MYSQL = (
    "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
    "WHERE DB = DATABASE() AND ID <> CONNECTION_ID()"
)


@pytest.fixture
def own_database(pg_url: str, pg_conn, uid: str):
    """A database nobody else connects to, so every session in it is the attempt's."""
    from urllib.parse import urlsplit, urlunsplit

    name = f"lc_sizing_{uid}"
    pg_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    pg_conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def own_schema(mysql_url: str, mysql_conn, uid: str):
    from urllib.parse import urlsplit, urlunsplit

    name = f"lc_sizing_{uid}"
    with mysql_conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{name}`")
    yield urlunsplit(urlsplit(mysql_url)._replace(path=f"/{name}"))
    with mysql_conn.cursor() as cur:
        cur.execute(f"DROP DATABASE `{name}`")


def _sessions_during_attempt(config: Path, job: str, count: list[str]) -> int:
    """How many sessions the database has while the job runs (the job itself asks)."""
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job, "-q"]
        + ["--manual", "--", *count],
        capture_output=True,
        text=True,
        env=worker_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return int(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("strategy", "expected"), [("pg-session", 1), ("pg-xact", 2), ("lease", 1)]
)
def test_connections_per_attempt_postgres(
    strategy: str, expected: int, own_database: str, uid: str, tmp_path: Path
) -> None:
    job = f"size_{uid}"
    config = job_config(tmp_path / "size.toml", own_database, job, strategy)
    count = ["psql", own_database, "-Atc", COUNT_PG]
    # the first attempt creates the ledger (and lease) tables; the second is a steady one
    _sessions_during_attempt(config, job, count)
    assert _sessions_during_attempt(config, job, count) == expected


@pytest.mark.mysql
def test_connections_per_attempt_mysql(own_schema: str, uid: str, tmp_path: Path) -> None:
    job = f"size_{uid}"
    config = job_config(tmp_path / "size.toml", own_schema, job, "mysql")
    parts = parse_url(own_schema)
    count = ["mariadb", "-h", str(parts.host), "-P", str(parts.port), "-u", str(parts.user)]
    count += ["-N", "-e", COUNT_MYSQL, str(parts.database)]
    _sessions_during_attempt(config, job, count)
    assert _sessions_during_attempt(config, job, count) == 1
