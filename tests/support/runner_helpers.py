"""Shared bits for tests that run `lockconsole run` in real OS processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.model.jobs import Run

from tests.support.config import job_toml

# Every strategy on every kind of database it runs on: (strategy, database kind).
STRATEGIES = [
    ("pg-session", "pg"),
    ("pg-xact", "pg"),
    ("mysql", "mysql"),
    ("lease", "pg"),
    ("lease", "mysql"),
    ("lease", "sqlite"),
    ("redis", "redis"),
]
STRATEGY_IDS = [f"{s}-{d}" for s, d in STRATEGIES]


@pytest.fixture(name="url_for")
def url_for_fixture(request: pytest.FixtureRequest, tmp_path: Path):
    """url_for(kind): the test PostgreSQL, MariaDB or Redis, or a SQLite file of the test's own.
    Import it into a test module to use it (the Redis kind also needs the redis fixtures)."""

    def pick(kind: str) -> str:
        if kind == "pg":
            return str(request.getfixturevalue("pg_url"))
        if kind == "mysql":
            return str(request.getfixturevalue("mysql_url"))
        if kind == "redis":
            return str(request.getfixturevalue("redis_url"))
        return f"sqlite:///{tmp_path / 'lease.db'}"

    return pick


# A job body that leaves a mark per real run, so a test can count runs, not claims.
MARK_AND_SLEEP = (
    "import sys, time; open(sys.argv[1], 'a').write('ran\\n'); time.sleep(float(sys.argv[2]))"
)


def lockconsole(config: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def runs_of(config: Path, job: str) -> list[Run]:
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        return ledger.runs(job)


def pg_job_config(url: str, job: str, strategy: str, **extra: Any) -> str:
    return job_toml(url, job, strategy=strategy, **extra)
