"""Run ids are per ledger: with a PostgreSQL and a MariaDB ledger both holding a run 1,
`lockconsole output main:1` and `output my:1` show each its own job's output, a bare `output 1`
is refused as ambiguous (exit 2, one line naming both), and the console's run detail reads the
output from the run's own ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.mysql


def lockconsole(config: Path, env: dict[str, str], *words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_each_ledgers_run_1_is_its_own(own_database, fresh_mysql, write_config, cli_env) -> None:
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n[databases.my]\nurl = "{fresh_mysql}"\n'
        f'[jobs.pg_job]\ndatabase = "main"\nstrategy = "pg-session"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", "print(\'from postgres\')"]\n'
        f'[jobs.my_job]\ndatabase = "my"\nstrategy = "mysql"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", "print(\'from mariadb\')"]\n'
    )
    for job in ("pg_job", "my_job"):
        ran = lockconsole(config, cli_env, "run", job, "--json")
        assert ran.returncode == 0, ran.stderr
        assert json.loads(ran.stdout)["run_id"] == ("main:1" if job == "pg_job" else "my:1")
    pg = lockconsole(config, cli_env, "output", "main:1")
    my = lockconsole(config, cli_env, "output", "my:1")
    assert pg.returncode == my.returncode == 0, (pg.stderr, my.stderr)
    assert pg.stdout == "from postgres\n" and my.stdout == "from mariadb\n"
    bare = lockconsole(config, cli_env, "output", "1")
    lines = bare.stderr.strip().splitlines()
    assert bare.returncode == 2 and len(lines) == 1, bare.stderr
    assert "main" in lines[0] and "my" in lines[0] and "name one" in lines[0]
    unknown = lockconsole(config, cli_env, "output", "nowhere:1")
    assert unknown.returncode == 2 and "not a ledger" in unknown.stderr

    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    with Console(load_config(str(config)), read_only=True) as console:
        found = console.run_output(1, job="my_job")  # what the run detail of my_job's run 1 asks
    assert found is not None and found.job == "my_job" and found.output == "from mariadb\n"
