"""`lockconsole prune` on real PostgreSQL, MariaDB and SQLite ledgers filled in bulk: exactly the
old rows go (plain SQL counts), new ones stay, a dry run changes nothing, batches stay bounded,
the prune is audited, and a double run's slot stays answerable in the summary table."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lockconsole.model.jobs import Outcome

from tests.support.prune_fill import Plain, ago, own_mysql_database

# Bounded batches are shown by their number and size, not by the volume: 15,000 old attempts in
# batches of 200 are 75 batches, as many as 150,000 in batches of 2,000.
OLD = 15_000  # attempts 200 days back
NEW = 3_000  # attempts 10 days back: kept by a 30-day retention
BATCH = 200


@pytest.fixture(params=["postgresql", "mysql", "sqlite"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A ledger database of this test's own on each dialect, its tables created."""
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import parse_config

    if request.param == "postgresql":
        url = str(request.getfixturevalue("own_database"))
        holder = None
    elif request.param == "mysql":
        holder = own_mysql_database(str(request.getfixturevalue("mysql_url")))
        url = holder.__enter__()
    else:
        url, holder = f"sqlite:///{tmp_path / 'ledger.db'}", None
    config = parse_config(f'[databases.main]\nurl = "{url}"\n')
    with Ledger(config.databases["main"]) as ledger:
        ledger.create_schema()
    try:
        yield url
    finally:
        if holder is not None:
            holder.__exit__(None, None, None)


def config_text(url: str, retention: str | None = "30d") -> str:
    ledger = f'[ledger]\nretention = "{retention}"\n' if retention else ""
    return (
        f'[databases.main]\nurl = "{url}"\n'
        '[jobs.j0]\nstrategy = "lease"\nschedule = "* * * * *"\ncommand = ["true"]\n' + ledger
    )


def prune_cli(
    config: Path, env: dict[str, str], *words: str, json_out: bool = True
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "lockconsole", "--config", str(config), "prune", *words]
    return subprocess.run(
        args + (["--json"] if json_out else []),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def the_ledger(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    (found,) = json.loads(done.stdout)["ledgers"]
    return dict(found)


def fill_requests(plain: Plain) -> None:
    """Three requests: finished long ago, queued long ago (never finished), finished lately."""
    p = plain.param()
    old, new = plain.stamp(ago(plain, 200)), plain.stamp(ago(plain, 1))
    for state, at in (("succeeded", old), ("queued", old), ("succeeded", new)):
        plain.rows(
            "INSERT INTO lockconsole_requests (job, forced, state, requested_by, requested_at, "
            f"updated_at, expires_at) VALUES ('j0', 0, {p}, 'ops@h', {p}, {p}, {p})",
            (state, at, at, at),
        )


def test_prune_deletes_exactly_the_old_rows_in_bounded_batches(
    ledger_url: str, write_config: Any, cli_env: dict[str, str]
) -> None:
    plain = Plain(ledger_url)
    old, new = OLD, NEW
    try:
        plain.fill(old, ago(plain, 200))
        plain.fill(new, ago(plain, 10))
        plain.rows(
            "INSERT INTO lockconsole_run_output (run_id, output) "
            "SELECT id, 'tail' FROM lockconsole_runs WHERE id % 1000 = 0"
        )
        fill_requests(plain)
        cutoff_guess = plain.stamp(ago(plain, 30))
        p = plain.param()
        old_runs = plain.count("lockconsole_runs", f"started_at < {p}", (cutoff_guess,))
        old_tails = plain.count(
            "lockconsole_run_output",
            f"run_id IN (SELECT id FROM lockconsole_runs WHERE started_at < {p})",
            (cutoff_guess,),
        )
        assert (old_runs, plain.count("lockconsole_runs")) == (old, old + new)
        total_tails = plain.count("lockconsole_run_output")
        assert old_tails > 0 and total_tails > old_tails
        config = write_config(config_text(ledger_url))

        dry = the_ledger(prune_cli(config, cli_env, "--dry-run", "--batch-size", str(BATCH)))
        assert dry["dry_run"] is True
        deleted = {"runs": old, "run_output": old_tails, "requests": 1, "holder_journal": 0}
        assert dry["deleted"] == deleted
        assert dry["summaries"] == 0  # every filled slot is plain ok
        assert plain.count("lockconsole_runs") == old + new  # nothing changed
        assert plain.count("lockconsole_run_output") == total_tails
        assert plain.count("lockconsole_requests") == 3
        assert not _has(plain, "lockconsole_audit")  # a dry run audits nothing, creates nothing

        done = the_ledger(prune_cli(config, cli_env, "--batch-size", str(BATCH)))
        assert done["deleted"] == deleted
        cutoff = done["cutoff"]
        assert plain.count("lockconsole_runs") == new
        assert plain.count("lockconsole_runs", f"started_at < {p}", (cutoff_guess,)) == 0
        assert plain.count("lockconsole_run_output") == total_tails - old_tails
        states = sorted(r[0] for r in plain.rows("SELECT state FROM lockconsole_requests"))
        assert states == ["queued", "succeeded"]  # the old queued one is not finished: kept
        # bounded: the attempts went in many batches, none larger than a batch and the rest of
        # the slots its edge cut (at most one minute of the fleet: 10 jobs x 3 instances)
        assert done["batches"] >= old // (BATCH + 30)
        assert 0 < done["largest_batch_rows"] <= BATCH + 30
        assert done["longest_lock_s"] <= done["longest_batch_s"] <= done["elapsed_s"]
        assert cutoff is not None and done["kept_with_newer_slot"] == 0
        audit = plain.rows("SELECT action, result, message FROM lockconsole_audit")
        assert [(a, r) for a, r, _ in audit] == [("prune", "pruned")]
        assert f"deleted {old} attempts" in audit[0][2]

        again = the_ledger(prune_cli(config, cli_env))
        assert again["deleted"] == {"runs": 0, "run_output": 0, "requests": 0, "holder_journal": 0}
        assert plain.count("lockconsole_runs") == new
    finally:
        plain.close()


def _has(plain: Plain, table: str) -> bool:
    try:
        plain.count(table)
    except Exception:
        return False
    return True


def test_a_double_run_and_a_miss_stay_answerable_after_pruning(
    ledger_url: str, write_config: Any, cli_env: dict[str, str]
) -> None:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import parse_config
    from lockconsole.model.jobs import Run

    plain = Plain(ledger_url)
    try:
        base = ago(plain, 100).replace(second=0, microsecond=0)
        slots = {
            name: base + timedelta(minutes=n)
            for n, name in enumerate(("dbl", "fail", "miss", "ok", "late"))
        }
        s = timedelta(seconds=1)

        def attempt(slot: str, instance: str, outcome: Outcome, start: float, end: float) -> Run:
            began = slots[slot] + start * s
            return Run(
                job="billing",
                slot=slots[slot],
                instance=instance,
                host="h",
                pid=1,
                trigger="scheduled",
                outcome=outcome,
                started_at=began,
                finished_at=slots[slot] + end * s,
            )

        runs = [
            attempt("dbl", "web-1", "succeeded", 0, 30),  # two executions 20 s at once
            attempt("dbl", "web-2", "succeeded", 10, 40),
            attempt("dbl", "web-3", "skipped", 1, 1),
            attempt("fail", "web-1", "failed", 0, 3),
            attempt("miss", "web-1", "skipped", 0, 0),
            attempt("miss", "web-2", "skipped", 0, 0),
            attempt("ok", "web-1", "succeeded", 0, 5),
            attempt("ok", "web-2", "skipped", 0, 0),
            attempt("late", "web-1", "lock_lost", 0, 5),
        ]
        # the "late" slot was rerun 90 days after it fired (younger than the cutoff): kept whole
        rerun = attempt("late", "web-2", "succeeded", 0, 5)
        runs.append(
            Run(**{**vars(rerun), "started_at": ago(plain, 10), "finished_at": ago(plain, 10)})
        )
        database = parse_config(f'[databases.main]\nurl = "{ledger_url}"\n').databases["main"]
        with Ledger(database) as ledger:
            for run in runs:
                ledger.record(run)
        config = write_config(config_text(ledger_url))
        done = the_ledger(prune_cli(config, cli_env))
        assert done["deleted"]["runs"] == 8 and done["kept_with_newer_slot"] == 1
        assert done["summaries"] == 3
        kept = plain.rows("SELECT instance, outcome FROM lockconsole_runs ORDER BY instance")
        assert kept == [("web-1", "lock_lost"), ("web-2", "succeeded")]
        rows = plain.rows(
            "SELECT job, status, attempts, instances, overlap_seconds "
            "FROM lockconsole_slot_summaries ORDER BY slot"
        )
        assert [tuple(r) for r in rows] == [
            ("billing", "double_run", 3, 3, 20.0),
            ("billing", "failed", 1, 1, 0.0),
            ("billing", "missed", 2, 2, 0.0),
        ]
        # pruning again (nothing new) neither duplicates nor changes a summary
        prune_cli(config, cli_env)
        assert plain.count("lockconsole_slot_summaries") == 3
    finally:
        plain.close()
