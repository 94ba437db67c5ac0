"""Ledger size: `check`, a metrics scrape and a console snapshot on a ledger of 10M rows against
the same on a ledger of 10k rows, same jobs, same lookback, in one run.

Both PostgreSQL ledgers hold the same last three hours of 20 per-minute jobs on three instances
(10,800 rows, the lookback); the big one also holds the months before, to 10M rows in all
(LOCKCONSOLE_BENCH_LEDGER_ROWS), made in bulk with INSERT … SELECT over generate_series. One
of the jobs always fails: its last success is never found near the ledger's newest end. The
work of each read must depend on the lookback and the jobs, not on the ledger's size: the
target is big / small <= 1.3x.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import Row, interleave, main, median, pg_url, progress, timed, with_database

JOBS = 20
INSTANCES = 3
LOOKBACK_MINUTES = 180
BIG_ROWS = int(os.environ.get("LOCKCONSOLE_BENCH_LEDGER_ROWS", 10_000_000))
ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_LEDGER_SIZE_ROUNDS", 9))
TARGET = 1.3
FILL = """
insert into lockconsole_runs
  (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at, exit_code)
select 'size_' || j, s, 'web-' || i, 'host-' || i, 100 + i, 'schedule',
       case when i <> 1 + (j + (extract(epoch from s)::bigint / 60)) %% 3 then 'skipped'
            when j = %(jobs)s then 'failed' else 'succeeded' end,
       s, s + interval '1 second', 0
from generate_series(1, %(jobs)s) j,
     generate_series(date_trunc('minute', now()) - %(minutes)s * interval '1 minute',
                     date_trunc('minute', now()) - interval '1 minute', interval '1 minute') s,
     generate_series(1, %(instances)s) i
"""


def _ledger(name: str, rows: int) -> str:
    """A fresh PostgreSQL database `name` whose ledger holds about `rows` rows (newest: now)."""
    import psycopg

    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database

    with psycopg.connect(pg_url("postgres"), autocommit=True) as admin:
        admin.execute(f'drop database if exists "{name}" with (force)')  # constant names
        admin.execute(f'create database "{name}"')
    url = with_database(pg_url(), name)
    Ledger(Database("main", parse_url(url))).create_schema()
    minutes = max(LOOKBACK_MINUTES, rows // (JOBS * INSTANCES))
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(FILL, dict(jobs=JOBS, minutes=minutes, instances=INSTANCES))
        conn.execute("vacuum analyze lockconsole_runs")
        [[count]] = conn.execute("select count(*) from lockconsole_runs").fetchall()
    progress(f"{name}: {count:,} rows")
    return url


def _config(url: str, folder: Path) -> tuple[Any, Path]:
    """The config of the 20 jobs on ledger `url`, and the file it was written to."""
    from lockconsole.config.loader import load_config

    jobs = "".join(
        f'[jobs.size_{j}]\nschedule = "* * * * *"\ncommand = ["true"]\n' for j in range(1, JOBS + 1)
    )
    path = folder / f"{url.rsplit('/', 1)[1]}.toml"
    path.write_text(
        f'[console]\nlookback = "{LOOKBACK_MINUTES}m"\n[databases.main]\nurl = "{url}"\n{jobs}'
    )
    return load_config(path), path


def _count(rows: int) -> str:
    """A row count as the row names say it: 10M, 1M, 10.8k."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if rows >= size:
            return f"{rows / size:.3g}{suffix}"
    return str(rows)


def _check(path: str) -> None:
    from lockconsole.cli.main import main as cli

    with contextlib.redirect_stdout(io.StringIO()):
        cli(["--config", path, "check", "--no-duplicates"])


def run() -> list[Row]:
    from prometheus_client import generate_latest

    from lockconsole.console.facade import Console
    from lockconsole.metrics.export import registry_for

    folder = Path(tempfile.mkdtemp(prefix="lockconsole-bench-"))
    configs = {
        "small": _config(
            _ledger("lockconsole_bench_small", JOBS * INSTANCES * LOOKBACK_MINUTES), folder
        ),
        "big": _config(_ledger("lockconsole_bench_big", BIG_ROWS), folder),
    }
    consoles = {name: Console(cfg, read_only=True) for name, (cfg, _) in configs.items()}
    try:
        registries = {n: registry_for(c, duplicates=False) for n, c in consoles.items()}
        sides: dict[str, Callable[[], float]] = {}
        for name, (_, file) in configs.items():
            console, registry, path = consoles[name], registries[name], str(file)
            sides[f"check {name}"] = lambda p=path: timed(lambda: _check(p))
            sides[f"scrape {name}"] = lambda r=registry: timed(lambda: generate_latest(r))
            sides[f"snapshot {name}"] = lambda c=console: timed(
                lambda: c.snapshot(duplicates=False)
            )
        for console in consoles.values():
            assert len(console.snapshot(duplicates=False).slots) >= JOBS * (LOOKBACK_MINUTES - 10)
        got = {k: median(v) for k, v in interleave(sides, ROUNDS).items()}
    finally:
        for console in consoles.values():
            console.close()
        shutil.rmtree(folder, ignore_errors=True)
    small = JOBS * INSTANCES * LOOKBACK_MINUTES
    note = f"{BIG_ROWS:,} rows against {small:,}, same jobs (one always fails)"
    return [
        Row(
            f"ledger size: {what} ({_count(BIG_ROWS)} / {_count(small)} rows)",
            got[f"{what} big"],
            got[f"{what} small"],
            "s",
            target=TARGET,
            note=note,
        )  # fmt: skip
        for what in ("check", "scrape", "snapshot")
    ]


if __name__ == "__main__":
    main(run)
