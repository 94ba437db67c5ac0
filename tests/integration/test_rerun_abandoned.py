"""`rerun_abandoned = true` on real PostgreSQL: a runner killed (-9) mid-job leaves its slot
"acquired"; the next attempt of the job, holding the lock, closes that slot as lock_lost and runs
it again (trigger "rerun"), after its own slot. The slot then reads "retried", not a double run.
Without the setting the slot is left as it was: nothing runs it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from tests.support.cli import run_cli

JOB = """
import os, pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
with open(folder / "ran", "a") as f:
    f.write(os.environ["LOCKCONSOLE_SLOT"] + " " + os.environ["LOCKCONSOLE_TRIGGER"] + "\\n")
if (folder / "block").exists():
    (folder / "block").unlink()
    (folder / "started").touch()
    time.sleep(600)
"""


def wait_for(check, what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@pytest.mark.parametrize("rerun", [True, False], ids=["rerun", "default"])
def test_an_abandoned_slot_is_run_again_by_the_next_attempt(
    rerun, own_database, write_config, cli_env, tmp_path
) -> None:
    script = tmp_path / "job.py"
    script.write_text(JOB, encoding="utf-8")
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.billing]\nstrategy = "pg-session"\n'
        f'schedule = "0 * * * *"\nrerun_abandoned = {str(rerun).lower()}\n'
        f"command = {json.dumps([sys.executable, str(script), str(tmp_path)])}\n"
    )
    hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    first_slot, next_slot = hour - timedelta(hours=2), hour - timedelta(hours=1)
    (tmp_path / "block").touch()
    argv = ["--config", str(config), "run", "billing", "--slot", first_slot.isoformat()]
    runner = subprocess.Popen(
        [sys.executable, "-m", "lockconsole", *argv],
        env=cli_env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        wait_for((tmp_path / "started").exists, "the first job to start")
        os.killpg(runner.pid, signal.SIGKILL)  # the runner, its supervisor and the job: all gone
        runner.wait(timeout=30)
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
    with psycopg.connect(own_database, autocommit=True) as conn:
        wait_for(
            lambda: conn.execute(
                "select count(*) = 0 from pg_locks where locktype = 'advisory'"
                " and database = (select oid from pg_database where datname = current_database())"
            ).fetchone()[0],
            "the killed runner's lock to go",
        )
    again = run_cli(
        config, "run", "billing", "--slot", next_slot.isoformat(), "--json", env=cli_env
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["slot"] == next_slot.isoformat()  # its own slot's result
    ran = (tmp_path / "ran").read_text().split("\n")
    with psycopg.connect(own_database) as conn:
        rows = conn.execute(
            "select slot, trigger, outcome from lockconsole_runs order by id"
        ).fetchall()
    first = [(t, o) for s, t, o in rows if s == first_slot]
    if rerun:
        assert ran == [f"{first_slot.isoformat()} scheduled", f"{next_slot.isoformat()} scheduled",
                       f"{first_slot.isoformat()} rerun", ""]  # fmt: skip
        assert first == [("scheduled", "lock_lost"), ("rerun", "succeeded")], rows
        from lockconsole.config.loader import load_config
        from lockconsole.console.facade import Console

        with Console(load_config(str(config)), read_only=True) as console:
            snap = console.snapshot(duplicates=False)
        status = {r.slot: r.status for r in snap.slots}
        assert status[first_slot] == "retried" and status[next_slot] == "ok", status
        assert not [a for a in snap.alerts if a.kind in ("double_run", "overlap")], snap.alerts
    else:
        assert ran == [
            f"{first_slot.isoformat()} scheduled",
            f"{next_slot.isoformat()} scheduled",
            "",
        ]
        assert first == [("scheduled", "acquired")], rows  # left for the console's sweep to close
