"""A retried failure, a real overlap and a serial double success, each with the status it
deserves, on every strategy, with real `lockconsole run` processes.

- retried: web-a's job fails, then web-b runs the same slot and succeeds: `retried`;
- overlap: web-a's job is running when its lock is forced away (`lockconsole release`, as an
  operator would); web-b then takes the lock and runs the same slot to success while web-a's
  job still runs (it ignores SIGTERM and waits for the test's go); only then does web-a's job
  end, its attempt `lock_lost`: the two executions overlapped, `double_run`;
- twice: with `once_per_slot = false`, web-a and web-b each run the slot to success, one
  after the other: `double_run` (a run after a success).

Each status is read three ways, which must agree with each other and with the one rule
(`model/verdict.slot_status` over the ledger's attempts): `check --json` (a double run is its
alert, a retry is none), the console's snapshot, and `lockconsole metrics --textfile`.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.model.slots import utcnow
from lockconsole.model.verdict import slot_status

from tests.support.cli import run_cli
from tests.support.helpers import wait_for
from tests.support.runner_helpers import (
    STRATEGIES,
    STRATEGY_IDS,
    lockconsole,
    runs_of,
)

# web-a's job in the overlap: touch argv[1], then run on through SIGTERM until argv[2] exists
OUTLAST = (
    "import pathlib, signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "pathlib.Path(sys.argv[1]).touch()\n"
    "end = time.monotonic() + 90\n"
    "while not pathlib.Path(sys.argv[2]).exists() and time.monotonic() < end:\n"
    "    time.sleep(0.02)\n"
)
EXPECTED = {"retry": "retried", "overlap": "double_run", "twice": "double_run"}


def config_text(strategy: str, lock_url: str, ledger_url: str, uid: str) -> str:
    text = f'[databases.main]\nurl = "{lock_url}"\n'
    if lock_url != ledger_url:
        text = (
            f'[lockconsole]\nledger_database = "ledger"\n[databases.ledger]\nurl = "{ledger_url}"\n'
            + text
        )
    common = (
        f'database = "main"\nstrategy = "{strategy}"\nschedule = "0 2 * * *"\n'
        f'lease_table = "shedlock_{uid}"\nwatchdog_interval = 0.2\n'
    )
    if strategy != "lease":
        common = common.replace(f'lease_table = "shedlock_{uid}"\n', "")
    return (
        text
        + f"[jobs.retry_{uid}]\n{common}"
        + f'[jobs.overlap_{uid}]\n{common}once_per_slot = false\nstop_grace = "60s"\n'
        + f"[jobs.twice_{uid}]\n{common}once_per_slot = false\n"
    )


def run(config: Path, env: dict[str, str], job: str, slot: datetime, instance: str, *cmd: str):
    return lockconsole(
        config, "run", job, "--slot", slot.isoformat(), "--instance", instance, "--json",
        "--", *cmd, env=env,
    )  # fmt: skip


def finished(proc: subprocess.Popen[str], code: int) -> dict[str, object]:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (proc.args, proc.returncode, out, err)
    return json.loads(out)


def metric(text: str, name: str, job: str, status: str) -> float | None:
    found = re.search(
        rf'^lockconsole_{name}\{{job_name="{job}",status="{status}"\}} (\S+)$', text, re.M
    )
    return float(found.group(1)) if found else None


@pytest.mark.parametrize(("strategy", "db"), STRATEGIES, ids=STRATEGY_IDS)
def test_retried_overlap_and_serial_double_success_on_every_strategy(
    strategy, db, url_for, uid, write_config, cli_env, tmp_path
):
    lock_url = url_for(db)
    ledger_url = url_for("pg") if strategy == "redis" else lock_url  # Redis: the ledger in SQL
    config = write_config(config_text(strategy, lock_url, ledger_url, uid))
    jobs = {case: f"{case}_{uid}" for case in EXPECTED}
    slot = (datetime.now(UTC) - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    python = sys.executable

    # retried: a failure, then another instance's success, one after the other
    failed = finished(
        run(config, cli_env, jobs["retry"], slot, "web-a", python, "-c", "raise SystemExit(1)"), 1
    )
    assert failed["outcome"] == "failed"
    assert (
        finished(run(config, cli_env, jobs["retry"], slot, "web-b", "true"), 0)["outcome"]
        == "succeeded"
    )

    # overlap: web-a runs; its lock is forced away; web-b runs the slot while web-a's job runs
    started, go = tmp_path / "a-started", tmp_path / "a-go"
    first = run(
        config,
        cli_env,
        jobs["overlap"],
        slot,
        "web-a",
        python,
        "-c",
        OUTLAST,
        str(started),
        str(go),
    )
    try:
        wait_for(started.exists, what="web-a's job has started")
        released = run_cli(
            config, "release", "--job", jobs["overlap"], "--yes", "--json", env=cli_env
        )
        assert released.returncode == 0, (released.stdout, released.stderr)
        second = finished(run(config, cli_env, jobs["overlap"], slot, "web-b", "true"), 0)
        assert second["outcome"] == "succeeded", second
        assert first.poll() is None, "web-a's job still runs: the two executions overlap"
    finally:
        go.touch()
    lost = finished(first, 4)
    assert lost["outcome"] == "lock_lost", lost

    # twice: two successes of one slot, one after the other (once_per_slot = false)
    for instance in ("web-a", "web-b"):
        assert (
            finished(run(config, cli_env, jobs["twice"], slot, instance, "true"), 0)["outcome"]
            == "succeeded"
        )

    now = utcnow()
    for case, job in jobs.items():
        runs = [r for r in runs_of(config, job) if r.slot == slot]
        assert slot_status(runs, now) == EXPECTED[case], (case, runs)
    spans = {r.instance: r for r in runs_of(config, jobs["overlap"])}
    assert spans["web-a"].started_at < spans["web-b"].started_at
    ended_b, ended_a = spans["web-b"].finished_at, spans["web-a"].finished_at
    assert ended_b is not None and ended_a is not None and ended_b < ended_a

    # check --json: a double run is its alert, naming the job and the slot, the overlap one
    # more; a retry is none
    check = run_cli(config, "check", "--json", "--no-duplicates", env=cli_env)
    assert check.returncode in (0, 1), (check.stderr, check.stdout[-2000:])
    alerts = [a for a in json.loads(check.stdout)["alerts"] if a.get("slot") == slot.isoformat()]
    kinds = {job: sorted(a["kind"] for a in alerts if a["job"] == job) for job in jobs.values()}
    assert kinds == {
        jobs["retry"]: [],
        jobs["overlap"]: ["double_run", "overlap"],  # and how long the two ran at once
        jobs["twice"]: ["double_run"],  # one after the other: no overlap
    }, check.stdout

    # the console's snapshot
    with Console(load_config(str(config)), read_only=True) as console:
        snap = console.snapshot(duplicates=False)
    assert not snap.errors, snap.errors
    statuses = {r.job: r.status for r in snap.slots if r.slot == slot}
    assert statuses == {jobs[case]: status for case, status in EXPECTED.items()}, snap.slots

    # the metrics: one slot of that status, and it is this slot
    target = tmp_path / "metrics.prom"
    exported = run_cli(config, "metrics", "--textfile", str(target), env=cli_env)
    assert exported.returncode == 0, exported.stderr
    text = target.read_text()
    for case, status in EXPECTED.items():
        job = jobs[case]
        lines = [ln for ln in text.splitlines() if f'"{job}"' in ln]
        assert metric(text, "job_slots", job, status) == 1, (status, lines)
        assert metric(text, "job_last_slot_timestamp_seconds", job, status) == slot.timestamp()
        others = {"ok", "retried", "double_run", "failed", "lock_lost"} - {status}
        assert all(not metric(text, "job_slots", job, s) for s in others), lines
