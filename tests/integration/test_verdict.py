"""The one rule for a slot's status (model/verdict.py), and the retry it tells from a double run:
on real PostgreSQL, a job that fails on one instance and is retried by the next in the same slot
is "retried", not DOUBLE RUN, in check, the metrics' statuses and the console's history pane."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockconsole.model.jobs import Outcome, Run
from lockconsole.model.verdict import slot_status

from tests.support.cli import run_cli

SLOT = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def attempt(instance: str, outcome: Outcome, start: float, end: float | None) -> Run:
    began = SLOT + timedelta(seconds=start)
    ended = None if end is None else SLOT + timedelta(seconds=end)
    return Run("billing", SLOT, instance, "h", 1, "scheduled", outcome, began, ended)


NOW = SLOT + timedelta(minutes=10)


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ([attempt("a", "succeeded", 0, 5), attempt("b", "skipped", 0.1, 0.1)], "ok"),
        ([attempt("a", "acquired", 0, None)], "running"),
        ([attempt("a", "failed", 0, 3), attempt("b", "succeeded", 3.5, 9)], "retried"),
        ([attempt("a", "lock_lost", 0, 3), attempt("b", "succeeded", 3, 9)], "retried"),
        ([attempt("a", "failed", 0, 5), attempt("b", "succeeded", 3, 9)], "double_run"),  # overlap
        ([attempt("a", "succeeded", 0, 2), attempt("b", "succeeded", 3, 9)], "double_run"),
        ([attempt("a", "failed", 0, 2), attempt("b", "failed", 3, 4)], "failed"),
        ([attempt("a", "succeeded", 0, 2), attempt("b", "failed", 3, 4)], "double_run"),
        ([attempt("a", "succeeded", 0, 2), attempt("b", "acquired", 3, None)], "double_run"),
        ([attempt("a", "failed", 0, 2), attempt("b", "acquired", 3, None)], "running"),
        ([attempt("a", "lock_lost", 0, None), attempt("b", "acquired", 3, None)], "running"),
        ([attempt("a", "paused", 0, 0)], "paused"),
        ([attempt("a", "skipped", 0, 0)], "missed"),
        ([], "missed"),
    ],
)
def test_the_one_rule(runs: list[Run], expected: str) -> None:
    assert slot_status(runs, NOW) == expected
    assert slot_status(list(reversed(runs)), NOW) == expected  # the order given does not matter


def test_a_slot_not_judged_yet_is_skipped_not_missed() -> None:
    assert slot_status([attempt("a", "skipped", 0, 0)], NOW, due=False) == "skipped"


def test_a_failed_attempt_retried_by_the_next_instance_is_no_double_run(
    own_database, write_config, cli_env, tmp_path
) -> None:
    flag = tmp_path / "fail-once"
    flag.touch()
    script = f"import os, sys; p = {str(flag)!r}\nif os.path.exists(p): os.remove(p); sys.exit(1)"
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.billing]\nstrategy = "pg-session"\n'
        f'schedule = "0 2 * * *"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(script)}]\n'
    )
    slot = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    first = run_cli(
        config,
        "run",
        "billing",
        "--slot",
        slot.isoformat(),
        "--json",
        env=dict(cli_env, LOCKCONSOLE_INSTANCE="web-1"),
    )
    assert first.returncode == 1 and json.loads(first.stdout)["outcome"] == "failed", first.stderr
    second = run_cli(
        config,
        "run",
        "billing",
        "--slot",
        slot.isoformat(),
        "--json",
        env=dict(cli_env, LOCKCONSOLE_INSTANCE="web-2"),
    )
    assert second.returncode == 0, second.stderr
    check = run_cli(config, "check", "--json", "--no-duplicates", env=cli_env)
    kinds = [a["kind"] for a in json.loads(check.stdout)["alerts"]]
    assert "double_run" not in kinds and "overlap" not in kinds, check.stdout

    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    with Console(load_config(str(config)), read_only=True) as console:
        snap = console.snapshot(duplicates=False)
    statuses = {r.slot: r.status for r in snap.slots if r.job == "billing"}
    assert statuses[slot] == "retried"


def test_the_ledger_views_fast_built_values_have_every_field() -> None:
    """console.ledger_view builds Span and SlotTally without __init__: every field named."""
    from dataclasses import fields

    from lockconsole.console.snapshot import ledger_view
    from lockconsole.model.verdict import SlotTally, Span

    assert tuple(f.name for f in fields(Span)) == ledger_view._SPAN
    source = Path(ledger_view.__file__).read_text()
    for f in fields(SlotTally):
        assert f'"{f.name}":' in source, f.name
