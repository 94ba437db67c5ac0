"""Bad command lines and environment values (tests/data/bad_cli.txt): each exits 2 with one
clear line on stderr and no traceback, and the database is unchanged - checked on a database
of the test's own (table list, ledger and audit row counts, before and after)."""

from __future__ import annotations

import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.support.settings import DATA, PYTHON

CASES_FILE = DATA / "bad_cli.txt"
SUBCOMMANDS = (
    "locks",
    "release",
    "run",
    "dupes",
    "history",
    "audit",
    "check",
    "schedule",
    "metrics",
    "init",
    "completion",
    "prune",
)


def cases() -> list[tuple[str, str]]:
    out = []
    for line in CASES_FILE.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            expect, _, argv = line.partition(" :: ")
            out.append((expect.strip(), argv.strip()))
    return out


def test_corpus_covers_every_subcommand() -> None:
    words = " ".join(argv for _, argv in cases()).split()
    assert all(cmd in words for cmd in SUBCOMMANDS)
    assert sum("ENV:" in argv for _, argv in cases()) >= 4
    assert len(cases()) >= 50


@pytest.fixture
def own_db(pg_url, pg_conn, uid):
    """A database of the test's own, with a ledger and an audit table that have rows."""
    import psycopg

    from lockconsole.backends.audit import Actor, AuditLog
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database, Run
    from lockconsole.model.slots import utcnow

    name = f"lockconsole_badcli_{uid}"
    pg_conn.execute(f'create database "{name}"')
    url = urlunsplit(urlsplit(pg_url)._replace(path=f"/{name}"))
    db = Database("main", parse_url(url))
    with Ledger(db) as ledger:
        ledger.record(Run("j", utcnow(), "web-1", "h", 1, "scheduled", "skipped", utcnow()))
    audit = AuditLog(db)
    audit.finish(audit.begin(Actor("t", "h"), "release", "seed"), "released")
    audit.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("create table x (id int)")
    yield url
    pg_conn.execute(f'drop database if exists "{name}" with (force)')


def state(url: str) -> tuple[list[str], list[int]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "select schemaname || '.' || tablename from pg_tables "
                "where schemaname not in ('pg_catalog', 'information_schema') order by 1"
            )
        ]
        counts = [conn.execute(f"select count(*) from {t}").fetchone()[0] for t in tables]
        locks = conn.execute(  # this database's only: pg_locks shows the whole cluster
            "select count(*) from pg_locks where locktype = 'advisory' and database = "
            "(select oid from pg_database where datname = current_database())"
        )
        return tables, [*counts, locks.fetchone()[0]]


def test_bad_command_lines(own_db: str, tmp_path: Path, cli_env: dict[str, str]) -> None:
    config = tmp_path / "lockconsole.toml"
    config.write_text(f'[databases.main]\nurl = "{own_db}"\n[jobs.j]\nschedule = "0 2 * * *"\n')
    config_env = tmp_path / "env.toml"
    config_env.write_text(
        '[databases.main]\nurl = "postgresql://u:${LOCKCONSOLE_SURELY_UNSET_VAR}'
        '@127.0.0.1/x"\n[jobs.j]\n'
    )
    cli_env.pop("LOCKCONSOLE_SURELY_UNSET_VAR", None)
    cli_env.pop("LOCKCONSOLE_INSTANCE", None)
    before = state(own_db)
    commands = []
    for expect, line in cases():
        words = shlex.split(line.format(config=config, config_env=config_env))
        env = dict(cli_env)
        while words and words[0].startswith("ENV:"):
            name, _, value = words.pop(0)[4:].partition("=")
            env[name] = value
        commands.append((expect, line, words, env))

    def run(item):
        expect, line, words, env = item
        done = subprocess.run(
            [PYTHON, "-m", "lockconsole", *words],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        return expect, line, done

    failures = []
    with ThreadPoolExecutor(max_workers=6) as pool:
        for expect, line, done in pool.map(run, commands):
            lines = done.stderr.splitlines()
            ok = (
                done.returncode == 2
                and done.stdout == ""
                and len(lines) == 1
                and lines[0].startswith("lockconsole: ")
                and expect in lines[0]
                and "Traceback" not in done.stderr
            )
            if not ok:
                failures.append(f"{line}\n  -> exit {done.returncode}: {done.stderr.strip()[:300]}")
    assert not failures, "\n".join(failures)
    assert state(own_db) == before, "a refused command changed the database"
