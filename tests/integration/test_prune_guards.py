"""`lockconsole prune`'s refusals (read-only, a bad or too short age, a bad retention, another
prune running), the run path writing meanwhile without waiting on it, and `schedule`'s daily
prune, on real PostgreSQL and MariaDB ledgers."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_prune import config_text
from tests.support.cli import CliResult, run_cli
from tests.support.helpers import eventually
from tests.support.prune_fill import Plain, ago, own_mysql_database


def prune_cli(config: Path, env: dict[str, str], *words: str) -> CliResult:
    return run_cli(config, *words, env=env)


def database(url: str) -> Any:
    from lockconsole.config.loader import parse_config

    return parse_config(f'[databases.main]\nurl = "{url}"\n').databases["main"]


@pytest.fixture
def filled_pg(own_database: str) -> Iterator[Plain]:
    from lockconsole.backends.ledger.store import Ledger

    with Ledger(database(own_database)) as ledger:
        ledger.create_schema()
    plain = Plain(own_database)
    plain.fill(3_000, ago(plain, 200))
    plain.fill(300, ago(plain, 1))
    yield plain
    plain.close()


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (("--read-only", "prune"), "prune refused: --read-only is set; nothing was done"),
        (("prune", "--read-only"), "prune refused: --read-only is set; nothing was done"),
        (("prune", "--older-than", "5 fortnights"), "prune: --older-than: '5 fortnights' is not"),
        (("prune", "--older-than", "1h"), "is shorter than [console] lookback (3d)"),
        (("prune", "--batch-size", "0"), "prune: --batch-size must be a whole number"),
    ],
)
def test_a_refused_prune_says_one_line_exits_2_and_changes_nothing(
    filled_pg: Plain, write_config: Any, cli_env: dict[str, str], words: tuple[str, ...], said: str
) -> None:
    config = write_config(config_text(filled_pg.url))
    done = prune_cli(config, cli_env, *words)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert filled_pg.count("lockconsole_runs") == 3_300
    assert filled_pg.value("SELECT to_regclass('lockconsole_audit')") is None  # nothing audited


def test_a_dry_run_is_allowed_read_only(
    filled_pg: Plain, write_config: Any, cli_env: dict[str, str]
) -> None:
    config = write_config(config_text(filled_pg.url))
    done = prune_cli(config, cli_env, "--read-only", "prune", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert "would delete 3000 attempts" in done.stdout
    assert filled_pg.count("lockconsole_runs") == 3_300


@pytest.mark.parametrize(
    ("retention", "said"),
    [
        ('"forever"', "ledger.retention: 'forever' is not a duration"),
        ('"2d"', "ledger.retention: '2d' is shorter than [console] lookback (3d)"),
        (
            '"90d"\nkeep = true',
            "ledger.keep: unknown key (allowed: journal, journal_every, retention)",
        ),
    ],
)
def test_a_bad_retention_is_one_line_and_exit_2(
    filled_pg: Plain,
    write_config: Any,
    cli_env: dict[str, str],
    retention: str,
    said: str,
) -> None:
    text = config_text(filled_pg.url, retention=None) + f"[ledger]\nretention = {retention}\n"
    done = prune_cli(write_config(text), cli_env, "prune")
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert filled_pg.count("lockconsole_runs") == 3_300


def test_config_shows_the_retention(write_config: Any, cli_env: dict[str, str]) -> None:
    import json

    config = write_config(config_text("sqlite:////tmp/unused.db", retention="90d"))
    done = prune_cli(config, cli_env, "config", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["retention_s"] == 90 * 86400
    done = prune_cli(
        write_config(config_text("sqlite:////tmp/unused.db", None)), cli_env, "config", "--json"
    )
    assert json.loads(done.stdout)["retention_s"] is None


def test_without_a_retention_prune_asks_for_one(
    filled_pg: Plain, write_config: Any, cli_env: dict[str, str]
) -> None:
    done = prune_cli(write_config(config_text(filled_pg.url, retention=None)), cli_env, "prune")
    assert done.returncode == 2
    assert "set [ledger] retention" in done.stderr and "--older-than" in done.stderr
    done = prune_cli(
        write_config(config_text(filled_pg.url, retention=None)),
        cli_env,
        "prune",
        "--older-than",
        "30d",
    )
    assert done.returncode == 0, done.stderr
    assert filled_pg.count("lockconsole_runs") == 300


def test_a_second_prune_of_the_same_ledger_does_nothing(filled_pg: Plain) -> None:
    from lockconsole.backends.ledger.retention.prune import LOCK_NAME, prune
    from lockconsole.model.keys import name_to_int64

    other = Plain(filled_pg.url)
    try:
        assert other.value("SELECT pg_try_advisory_lock(%s)", (name_to_int64(LOCK_NAME),))
        report = prune(database(filled_pg.url), timedelta(days=30))
        assert report.busy and report.runs == 0
        assert filled_pg.count("lockconsole_runs") == 3_300
    finally:
        other.close()
    assert prune(database(filled_pg.url), timedelta(days=30)).runs == 3_000


def test_mariadb_a_prune_waits_only_for_a_prune_of_its_own_database(mysql_url: str) -> None:
    """GET_LOCK names are the whole server's: the prune lock names its database, so a prune of
    another database on the same server goes on, and a second prune of this one does nothing."""
    from lockconsole.backends import sqlfiles
    from lockconsole.backends.ledger.retention.prune import LOCK_NAME, prune
    from lockconsole.backends.ledger.store import Ledger

    with own_mysql_database(mysql_url) as mine, own_mysql_database(mysql_url) as other:
        with Ledger(database(mine)) as ledger:
            ledger.create_schema()
        plain = Plain(mine)
        plain.fill(300, ago(plain, 200))
        holders = [Plain(other), Plain(mine)]  # as a prune of each database takes its lock
        try:
            take = sqlfiles.load("try_prune_lock", "mysql")
            assert holders[0].value(take, {"name": LOCK_NAME}) == 1
            report = prune(database(mine), timedelta(days=30))
            assert not report.busy and report.runs == 300, report.line()
            plain.fill(300, ago(plain, 200))
            assert holders[1].value(take, {"name": LOCK_NAME}) == 1
            report = prune(database(mine), timedelta(days=30))
            assert report.busy and report.runs == 0
            assert plain.count("lockconsole_runs") == 300
        finally:
            for holder in holders:
                holder.close()
            plain.close()


@pytest.fixture(params=["postgresql", "mysql"])
def big_ledger(request: pytest.FixtureRequest) -> Iterator[Plain]:
    from lockconsole.backends.ledger.store import Ledger

    holder = None
    if request.param == "postgresql":
        url = str(request.getfixturevalue("own_database"))
    else:
        holder = own_mysql_database(str(request.getfixturevalue("mysql_url")))
        url = holder.__enter__()
    with Ledger(database(url)) as ledger:
        ledger.create_schema()
    plain = Plain(url)
    plain.fill(20_000, ago(plain, 200))
    try:
        yield plain
    finally:
        plain.close()
        if holder is not None:
            holder.__exit__(None, None, None)


def test_the_run_path_writes_while_a_prune_runs_and_never_waits_a_batch_long(
    big_ledger: Plain,
) -> None:
    """Attempts recorded and finished (the run path's ledger writes) on another connection
    while a prune works through 20,000 rows in 50 batches: each write is as quick as a batch at
    most."""
    from lockconsole.backends.ledger.retention.prune import prune
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

    db = database(big_ledger.url)
    result: dict[str, Any] = {}
    writes: list[float] = []
    pruner = threading.Thread(
        target=lambda: result.update(report=prune(db, timedelta(days=30), batch_size=400))
    )
    with Ledger(db) as ledger:
        now = ledger.now()
        slot = now.replace(second=0, microsecond=0)
        pruner.start()
        while pruner.is_alive():
            began = time.perf_counter()
            run = ledger.record(
                Run(
                    job="live",
                    slot=slot,
                    instance=f"web-{len(writes)}",
                    host="h",
                    pid=1,
                    trigger="scheduled",
                    outcome="acquired",
                    started_at=ledger.now(),
                )
            )
            ledger.finish(run, "succeeded", exit_code=0)
            writes.append(time.perf_counter() - began)
            slot += timedelta(minutes=1)
        pruner.join()
    report = result["report"]
    assert report.runs == 20_000 and report.batches >= 50
    assert len(writes) >= 5  # the writes really ran during the prune
    assert max(writes) < max(1.0, 3 * report.longest_lock), (max(writes), report.longest_lock)
    assert big_ledger.count("lockconsole_runs") == len(writes)


def test_schedule_prunes_the_ledger_of_its_jobs_daily(own_database: str, uid: str) -> None:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import parse_config
    from lockconsole.engine.scheduler import Scheduler

    with Ledger(database(own_database)) as ledger:
        ledger.create_schema()
    plain = Plain(own_database)
    try:
        plain.fill(5_000, ago(plain, 200))
        config = parse_config(
            f'[databases.main]\nurl = "{own_database}"\n[jobs.daily_{uid}]\n'
            'strategy = "pg-session"\nschedule = "0 3 1 1 *"\ncommand = ["true"]\n'
            '[ledger]\nretention = "30d"\n'
        )
        scheduler = Scheduler(
            config,
            list(config.jobs.values()),
            instance=f"web-{uid}",
            prune_first=0.0,
            prune_every=0.3,
        )
        loop = threading.Thread(target=scheduler.run_forever)
        loop.start()
        try:
            audited = "SELECT count(*) FROM lockconsole_audit WHERE action = 'prune' AND "
            eventually(lambda: _count(plain, audited + "result = 'pruned'") >= 2)
        finally:
            scheduler.stop()
            loop.join(10)
        assert not loop.is_alive()
        assert plain.count("lockconsole_runs") == 0
        rows = plain.rows("SELECT os_user, host, message FROM lockconsole_audit ORDER BY id")
        assert rows[0][:2] == ("schedule", f"web-{uid}")
        assert "deleted 5000 attempts" in rows[0][2]
        assert "deleted 0 attempts" in rows[1][2]  # the next day's finds nothing left
    finally:
        plain.close()


def _count(plain: Plain, sql: str) -> int:
    try:
        return int(plain.value(sql))
    except Exception:  # the audit table is not there yet
        return 0
