"""`lockconsole history` filters in the database and shows each run's id as `output` takes it:
--job, --instance, --outcome, --since, --until, --slot, --limit, on real PostgreSQL."""

from __future__ import annotations

import json

import psycopg

from tests.support.cli import run_cli


def test_history_filters_and_ids(own_database, write_config, cli_env) -> None:
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n'
        '[jobs.billing]\nstrategy = "pg-session"\ncommand = ["true"]\n'
        '[jobs.reports]\nstrategy = "pg-session"\ncommand = ["false"]\n'
    )
    for job, instance, slot in (
        ("billing", "web-1", "2026-11-01T02:00:00Z"),
        ("billing", "web-2", "2026-11-01T02:00:00Z"),  # skips: the slot already ran
        ("billing", "web-2", "2026-11-02T02:00:00Z"),
        ("reports", "web-1", "2026-11-02T02:00:00Z"),  # fails
    ):
        done = run_cli(
            config, "run", job, "--slot", slot, env=dict(cli_env, LOCKCONSOLE_INSTANCE=instance)
        )
        assert done.returncode in (0, 1, 3), done.stderr

    def ids(*words: str) -> list[str]:
        done = run_cli(config, "history", "--json", *words, env=cli_env)
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["schema"] == 1 and all(r["ledger"] == "main" for r in doc["runs"])
        return [r["run_id"] for r in doc["runs"]]

    assert ids() == ["main:4", "main:3", "main:2", "main:1"]
    assert ids("--job", "billing") == ["main:3", "main:2", "main:1"]
    assert ids("--instance", "web-2") == ["main:3", "main:2"]
    assert ids("--outcome", "failed") == ["main:4"]
    assert ids("--outcome", "skipped", "--job", "billing") == ["main:2"]
    assert ids("--slot", "2026-11-02T02:00:00+00:00") == ["main:4", "main:3"]
    assert ids("--limit", "1") == ["main:4"]
    with psycopg.connect(own_database, autocommit=True) as conn:  # place run 1 a day back
        conn.execute(
            "update lockconsole_runs set started_at = started_at - interval '1 day' where id = 1"
        )
    assert ids("--since", "12h") == ["main:4", "main:3", "main:2"]
    assert ids("--until", "12h") == ["main:1"]
    table = run_cli(config, "history", env=dict(cli_env, COLUMNS="200")).stdout
    assert "main:4" in table and "main:1" in table
    for bad in (
        ["--since", "yesterday"],
        ["--until", "2026-11-01T00:00"],
        ["--outcome", "won"],
        ["--job", "nope"],
    ):
        done = run_cli(config, "history", *bad, env=cli_env)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, (
            bad,
            done.stderr,
        )
