"""`lockconsole schedule` on three instances: every slot runs once; SIGTERM stops cleanly."""

from __future__ import annotations

import signal
import time
from collections import defaultdict

from tests.support.helpers import DEADLINE
from tests.support.runner_helpers import lockconsole, runs_of


def test_three_schedulers_run_each_slot_once(pg_url, uid, write_config, cli_env, tmp_path):
    job = f"every2s_{uid}"
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        strategy = "pg-session"
        schedule = "* * * * * */2"
        command = ["sleep", "0.5"]
        """
    )
    procs = [
        lockconsole(config, "schedule", "--instance", f"web-{i}", "--for", "7", env=cli_env)
        for i in (1, 2, 3)
    ]
    for p in procs:
        assert p.wait(timeout=60) == 0, p.communicate()[1]
    by_slot: dict[object, list[str]] = defaultdict(list)
    for run in runs_of(config, job):
        by_slot[run.slot].append(run.outcome)
    for slot, outcomes in by_slot.items():  # never twice
        assert outcomes.count("succeeded") <= 1, (slot, outcomes)
        assert set(outcomes) <= {"succeeded", "skipped"}, (slot, outcomes)
    # A slot can pass without a run when the previous slot's run still holds the job's lock
    # (a starved machine stretches a 0.5 s job past the 2 s period): every instance skips it.
    ran = [slot for slot, outcomes in by_slot.items() if "succeeded" in outcomes]
    assert len(ran) >= 2, by_slot


def test_sigterm_stops_scheduler_and_its_job(pg_url, uid, write_config, cli_env, tmp_path):
    job = f"long_{uid}"
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        schedule = "* * * * * *"
        command = ["sleep", "60"]
        stop_grace = 2
        """
    )
    proc = lockconsole(config, "schedule", env=cli_env)
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline and not any(
        r.outcome == "acquired" for r in runs_of(config, job)
    ):
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    outcomes = [r.outcome for r in runs_of(config, job)]
    assert "acquired" not in outcomes, "no attempt is left running"
    assert "failed" in outcomes
