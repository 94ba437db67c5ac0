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
from pgbouncer_fixture import pgbouncer  # noqa: F401  (the fixture)
from psycopg import sql

from fault_helpers import job_config, runs_of, worker_env

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
    pgbouncer: str,  # noqa: F811
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
def limited_role(pg_conn, uid: str):  # type: ignore[no-untyped-def]
    """A login role whose connection limit is 0: the server refuses it as out of connections."""
    role = f"lc_full_{uid}"
    pg_conn.execute(sql.SQL("CREATE ROLE {} LOGIN CONNECTION LIMIT 0").format(sql.Identifier(role)))
    yield role
    pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_out_of_connections_says_what_to_do(pg_url: str, limited_role: str, uid, tmp_path) -> None:  # type: ignore[no-untyped-def]
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
