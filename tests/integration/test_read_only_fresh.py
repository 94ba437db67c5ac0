"""`--read-only` on a database where lockconsole never ran (PostgreSQL and MariaDB): every viewing
command works, creates no table and says what is missing; on a ledger made by an older release
(a column added since is absent) it reads the rows and alters nothing."""

from __future__ import annotations

import json

import psycopg
import pytest

from tests.support.cli import run_cli
from tests.support.helpers import mysql_connect

VIEWING = [
    ["check"],
    ["check", "--json"],
    ["history"],
    ["history", "--json"],
    ["audit"],
    ["locks"],
    ["config"],
]


def pg_tables(url: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select table_name from information_schema.tables where table_schema = 'public'"
        ).fetchall()
    return sorted(r[0] for r in rows)


def my_tables(url: str) -> list[str]:
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("show tables")
            return sorted(r[0] for r in cur.fetchall())
    finally:
        conn.close()


@pytest.mark.parametrize("kind", ["postgresql", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_read_only_on_a_fresh_database_creates_nothing(
    kind, request, write_config, cli_env, tmp_path
) -> None:
    url = request.getfixturevalue("own_database" if kind == "postgresql" else "fresh_mysql")
    strategy = "pg-session" if kind == "postgresql" else "mysql"
    config = write_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.billing]\nstrategy = "{strategy}"\n'
        'schedule = "0 2 * * *"\ncommand = ["true"]\n'
    )
    tables = pg_tables if kind == "postgresql" else my_tables
    assert tables(url) == []
    for words in VIEWING:
        done = run_cli(config, *words, "--read-only", env=cli_env)
        assert done.returncode == 0, (words, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
    prom = tmp_path / "m.prom"
    exported = run_cli(config, "metrics", "--textfile", str(prom), "--read-only", env=cli_env)
    assert exported.returncode == 0, exported.stderr
    assert tables(url) == [], "read-only made a table"
    check = json.loads(run_cli(config, "check", "--json", "--read-only", env=cli_env).stdout)
    assert check["alerts"] == [] and check["errors"] == {}
    assert any("no run ledger table" in note for _, note in check["notes"]), check
    said = run_cli(config, "check", "--read-only", "-o", "tsv", "--no-headers", env=cli_env).stdout
    assert "note\t-\tmain: no run ledger table (lockconsole_runs)" in said, said
    # the same commands without --read-only make the ledger, as before
    assert run_cli(config, "history", env=cli_env).returncode == 0
    assert "lockconsole_runs" in tables(url)


def test_read_only_reads_an_older_ledger_without_altering_it(
    own_database, write_config, cli_env
) -> None:
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.billing]\nstrategy = "pg-session"\n'
        'command = ["true"]\n'
    )
    ran = run_cli(config, "run", "billing", "--json", env=cli_env)
    assert ran.returncode == 0, ran.stderr
    with psycopg.connect(own_database, autocommit=True) as conn:
        conn.execute("alter table lockconsole_runs drop column clock_offset_ms, drop column actor")
        before = conn.execute(
            "select column_name from information_schema.columns"
            " where table_name = 'lockconsole_runs' order by 1"
        ).fetchall()
    history = run_cli(config, "history", "--json", "--read-only", env=cli_env)
    assert history.returncode == 0, history.stderr
    runs = json.loads(history.stdout)["runs"]
    assert [(r["job"], r["outcome"], r["clock_offset_ms"], r["actor"]) for r in runs] == [
        ("billing", "succeeded", None, None)
    ]
    check = run_cli(config, "check", "--read-only", env=cli_env)
    assert check.returncode == 0, check.stdout + check.stderr
    with psycopg.connect(own_database) as conn:
        after = conn.execute(
            "select column_name from information_schema.columns"
            " where table_name = 'lockconsole_runs' order by 1"
        ).fetchall()
    assert after == before  # no column added back
