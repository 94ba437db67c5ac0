"""Every bad configuration of the corpus (tests/data/bad) against a PostgreSQL database of its
own: one line on stderr, exit 2, and the database's tables and ledger rows as they were. (What
each file says is tested without a server in tests/unit/config/test_config.py.)"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from tests.support.cli import run_cli
from tests.unit.config.test_config import (
    BAD_FILES,
    CORPUS_PG_URL,
    assert_one_line_error,
    headers,
)


def _job_name(text: str) -> str | None:
    m = re.search(r'^\[jobs\.("?)([^\]"]*)\1\]', text, re.M)
    return m.group(2) if m else None


def _has_run_subcommand() -> bool:
    from lockconsole.cli.main import build_parser

    parser = build_parser()
    for action in parser._actions:
        if action.choices and isinstance(action.choices, dict) and "run" in action.choices:
            return True
    return False


def _state(conn) -> tuple[list[str], int | None]:
    tables = [
        r[0]
        for r in conn.execute(
            "select tablename from pg_tables where schemaname = 'public' order by 1"
        ).fetchall()
    ]
    runs = None
    if "lockconsole_runs" in tables:
        runs = conn.execute("select count(*) from lockconsole_runs").fetchone()[0]
    return tables, runs


def test_bad_configs_change_nothing(
    pg_url: str, pg_conn, uid: str, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    """Every bad config through `config` (and `run <job> -- true` if that exists) against a
    database of its own: one clear line naming the file and line, exit 2, and its tables and
    ledger rows stay as they were."""
    import psycopg

    dbname = f"lockconsole_bad_{uid}"
    pg_conn.execute(f'create database "{dbname}"')
    parts = urlsplit(pg_url)
    own_url = urlunsplit(parts._replace(path=f"/{dbname}"))
    try:
        with psycopg.connect(own_url, autocommit=True) as own:
            own.execute("create table lockconsole_runs (id bigserial primary key, job text)")
            own.execute("insert into lockconsole_runs (job) values ('nightly'), ('j')")
            before = _state(own)

            with_run = _has_run_subcommand()
            commands = []
            for path in BAD_FILES:
                text = path.read_text(encoding="utf-8").replace(CORPUS_PG_URL, own_url)
                copy = tmp_path / path.name
                copy.write_text(text, encoding="utf-8")
                job = _job_name(text)  # one process per file: `run` where there is a job
                if with_run and job:
                    commands.append(["--config", str(copy), "run", job, "--", "true"])
                else:
                    commands.append(["--config", str(copy), "config"])
            with ThreadPoolExecutor(max_workers=8) as pool:
                results = list(pool.map(lambda args: run_cli(None, *args, env=cli_env), commands))
            for args, result in zip(commands, results, strict=True):
                error = assert_one_line_error(result)
                path = Path(args[1])
                expect, line = headers(path)  # the corpus runs once: message and line here
                assert error.startswith(f"lockconsole: {path}"), error
                assert expect in error, (args, error)
                if line is not None:
                    assert f"{path}:{line}:" in error, (args, error)
            assert _state(own) == before
            runs = sum(1 for c in commands if "run" in c)
            assert runs > 50 if with_run else runs == 0
    finally:
        pg_conn.execute(f'drop database if exists "{dbname}" with (force)')
