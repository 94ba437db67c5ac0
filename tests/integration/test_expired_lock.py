"""A lock that runs out while its job runs, with nobody taking it over: the attempt ends
`lock_lost` (never `succeeded`), and the loss is noticed within a bound of the watchdog's
interval. For the stores whose lock expires by itself: a lease (PostgreSQL, MariaDB, SQLite)
and Redis (PX), each with `lockconsole run` in a real process and a job that would run for 30 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.runner_helpers import runs_of

MAX_DURATION = 2.0  # seconds the lock lasts: the job runs far longer
WATCHDOG = 0.2
STOP_GRACE = 1.0
# expiry, then at most one watchdog interval and one check to notice, then the stop (the job
# dies on SIGTERM at once); the rest is slack for a loaded 2-core machine
BOUND = MAX_DURATION + 2 * WATCHDOG + STOP_GRACE + 2.0
JOB = [sys.executable, "-c", "import time; time.sleep(30)"]


@pytest.fixture(params=["lease-postgresql", "lease-mysql", "lease-sqlite", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str, str]:
    """(strategy, the lock's database URL, the ledger's URL)."""
    kind = request.param
    if kind == "lease-postgresql":
        url = request.getfixturevalue("own_database")
        return "lease", url, url
    if kind == "lease-mysql":
        url = request.getfixturevalue("fresh_mysql")
        return "lease", url, url
    if kind == "lease-sqlite":
        url = f"sqlite:///{tmp_path / 'lease.db'}"
        return "lease", url, url
    return "redis", request.getfixturevalue("redis_url"), request.getfixturevalue("own_database")


def test_a_lock_that_runs_out_mid_run_is_lock_lost_within_its_bound(
    store: tuple[str, str, str], uid: str, write_config, cli_env: dict[str, str]
) -> None:
    strategy, url, ledger = store
    job = f"expiring_{uid}"
    config = write_config(
        f"""
        [lockconsole]
        ledger_database = "ledger"
        [databases.main]
        url = "{url}"
        [databases.ledger]
        url = "{ledger}"
        [jobs.{job}]
        database = "main"
        strategy = "{strategy}"
        lease_table = "lease_{uid}"
        redis_prefix = "job-lock:{uid}:"
        max_duration = "{MAX_DURATION:g}s"
        watchdog_interval = {WATCHDOG}
        stop_grace = {STOP_GRACE}
        """
    )
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job, "--", *JOB],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )  # fmt: skip
    took = time.monotonic() - began
    (run,) = runs_of(config, job)
    assert run.outcome == "lock_lost", (run, done.stderr)
    assert done.returncode != 0, done.stderr
    assert run.finished_at is not None
    held = (run.finished_at - run.started_at).total_seconds()
    # it held the lock for its whole duration, and ended within the bound after it ran out
    assert MAX_DURATION - 0.5 <= held <= BOUND, (held, BOUND)
    assert took < 30, took  # the 30 s job was stopped, not waited for
