"""A job run end to end over a PostgreSQL conninfo string instead of a URL (the parsing itself
is tested in tests/unit/config/test_urls.py)."""

from __future__ import annotations

import json
import uuid

from lockconsole.config.urls import parse_url

from tests.support.cli import run_cli
from tests.support.config import config_toml


def test_lockconsole_runs_a_job_through_a_conninfo_string(pg_url, write_config, cli_env):
    """The whole run path (lock, ledger, outcome) over a conninfo string, and `locks` sees it."""
    real = parse_url(pg_url)
    conninfo = f"host={real.host} port={real.port or 5432} dbname={real.database} user={real.user}"
    job = f"conninfo_{uuid.uuid4().hex[:8]}"
    spec = {"strategy": "pg-session", "command": ["true"]}
    config = write_config(config_toml(databases={"main": conninfo}, jobs={job: spec}))
    ran = run_cli(config, "run", job, "--instance", "web-1", env=cli_env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    history = run_cli(config, "history", "--job", job, "--json", env=cli_env, timeout=60)
    assert history.returncode == 0, history.stderr
    runs = json.loads(history.stdout)["runs"]
    assert [r["outcome"] for r in runs] == ["succeeded"]
