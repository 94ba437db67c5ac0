"""Stops that come from inside the process: Scheduler.stop(), a lost lock while the job starts,
and KeyboardInterrupt / SystemExit / SIGINT in a Python app's run_once. Real PostgreSQL, real
child processes; the instant is placed with faultpoints.set_hook."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from lockconsole import run_once
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config
from lockconsole.engine import faultpoints as fp
from lockconsole.engine.execute import run_target
from lockconsole.engine.runner import begin
from lockconsole.engine.scheduler import Scheduler

from tests.support.settings import PYTHON
from tests.support.stop_helpers import STEPS, pg_lock_holder

GRACE = 2.0


@pytest.fixture
def hooks() -> Iterator[list[str]]:
    """Names of the fault points a test hooked; all removed afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        fp.set_hook(name, None)


def _config(url: str, job: str, key: int, command: list[str] | None = None):
    cmd = "" if command is None else "command = [" + ", ".join(f'"{c}"' for c in command) + "]\n"
    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        f'key = {key}\nschedule = "* * * * * *"\nstop_grace = {GRACE}\n'
        f"watchdog_interval = 0.2\n{cmd}",
        "<test>",
    )


def _runs(config, job):
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        return ledger.runs(job)


@pytest.mark.parametrize("step", fp.ATTEMPT_POINTS)
def test_scheduler_stop_at_each_step(step, pg_url, pg_conn, uid, tmp_path, hooks):
    job, key = f"sstop_{uid}", int(uid[:8], 16) + 3
    marks = tmp_path / "marks"
    seconds = "0" if step == fp.BEFORE_RECORD else "60"
    toml_steps = STEPS.replace("\\", "\\\\").replace('"', '\\"')
    config = _config(pg_url, job, key, [PYTHON, "-c", toml_steps, str(marks), seconds])
    scheduler = Scheduler(config, list(config.jobs.values()), instance="web-1")
    asked: list[float] = []

    def stop_here() -> None:
        if not asked:
            if step == fp.JOB_STARTED:
                deadline = time.monotonic() + 30
                while not marks.exists() and time.monotonic() < deadline:
                    time.sleep(0.01)
            asked.append(time.monotonic())
            scheduler.stop("stopped by the test")

    hooks.append(step)
    fp.set_hook(step, stop_here)
    thread = threading.Thread(target=scheduler.run_forever, daemon=True)
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive() and asked
    took = time.monotonic() - asked[0]
    # the job runs 60 s: returning this soon was the stop's doing (a deadline, not a latency)
    assert took < 30, f"run_forever returned {took:.2f} s after stop()"
    assert pg_lock_holder(pg_conn, key) is None
    runs = _runs(config, job)
    outcomes = [r.outcome for r in runs]
    assert "acquired" not in outcomes, runs
    if step in (fp.CONNECTING, fp.BEFORE_TRY_LOCK):
        assert runs == [] and not marks.exists()
    elif step in (fp.AFTER_ACQUIRE, fp.BEFORE_SPAWN, fp.AFTER_SPAWN):
        (failed,) = [r for r in runs if r.outcome == "failed"]
        assert failed.message == "stopped by the test: before the job started"
        assert not marks.exists(), "the job never started"
    elif step == fp.JOB_STARTED:
        assert "failed" in outcomes and "finished" not in marks.read_text()
    elif step == fp.BEFORE_RECORD:
        assert "succeeded" in outcomes


def test_lock_lost_while_the_job_starts(pg_url, pg_conn, uid, tmp_path, hooks):
    """The watchdog finds the lock gone between spawning and starting: the job never starts."""
    job, key = f"lstart_{uid}", int(uid[:8], 16) + 5
    config = _config(pg_url, job, key)
    spec = config.job(job)
    attempt = begin(spec, config.database_for(spec), config.ledger_for(spec), instance="w")
    assert attempt.acquired

    def lose_lock() -> None:
        pg_conn.execute("select pg_terminate_backend(%s)", (attempt.run.session_id,))
        assert attempt.lost.wait(20), "the watchdog saw the lock go"

    hooks.append(fp.AFTER_SPAWN)
    fp.set_hook(fp.AFTER_SPAWN, lose_lock)
    marks = tmp_path / "marks"
    run = run_target(attempt, [PYTHON, "-c", STEPS, str(marks), "60"], handle_signals=False)
    assert run.outcome == "lock_lost"
    assert not marks.exists(), "the job never started"
    assert pg_lock_holder(pg_conn, key) is None
    ((row),) = _runs(config, job)
    assert row.outcome == "lock_lost" and row.finished_at is not None


@pytest.mark.parametrize(
    ("exc", "code", "message"),
    [
        (KeyboardInterrupt(), 130, "interrupted by KeyboardInterrupt"),
        (SystemExit(3), 3, "interrupted by SystemExit(3)"),
    ],
    ids=["KeyboardInterrupt", "SystemExit"],
)
def test_run_once_records_and_releases_then_reraises(
    exc, code, message, pg_url, pg_conn, uid, empty_registry
):
    job, key = f"kint_{uid}", int(uid[:8], 16) + 9
    config = _config(pg_url, job, key)
    with pytest.raises(type(exc)), run_once(job, config=config) as run:
        assert run.acquired and pg_lock_holder(pg_conn, key) is not None
        raise exc
    assert pg_lock_holder(pg_conn, key) is None
    (row,) = _runs(config, job)
    assert (row.outcome, row.exit_code, row.message) == ("failed", code, message)


@pytest.fixture
def interactive_sigint() -> Iterator[None]:
    """Ctrl-C as an interactive process gets it: Python's default handler. A suite started in
    the background inherits SIGINT ignored, and run_once rightly honours an ignored SIGINT."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, before)


@pytest.mark.parametrize("step", [fp.CONNECTING, fp.BEFORE_TRY_LOCK, fp.AFTER_ACQUIRE])
@pytest.mark.usefixtures("interactive_sigint")
def test_sigint_while_run_once_takes_the_lock(step, pg_url, pg_conn, uid, hooks, empty_registry):
    """Ctrl-C while run_once is entering: nothing is left held or "acquired", then it raises."""
    job, key = f"kenter_{uid}", int(uid[:8], 16) + 11
    config = _config(pg_url, job, key)
    hooks.append(step)
    seen: list[object] = []  # what the process looked like when Ctrl-C came, for a failure

    def ctrl_c() -> None:
        seen.append((signal.getsignal(signal.SIGINT), signal.pthread_sigmask(signal.SIG_BLOCK, [])))
        os.kill(os.getpid(), signal.SIGINT)

    fp.set_hook(step, ctrl_c)
    body: list[str] = []
    with pytest.raises(KeyboardInterrupt), run_once(job, config=config) as run:
        body.append("ran")
        assert not run.acquired, seen
    assert body == [], "the body never ran"
    assert pg_lock_holder(pg_conn, key) is None
    if step == fp.AFTER_ACQUIRE:
        (row,) = _runs(config, job)
        assert row.outcome == "failed" and "before the job started" in row.message
    else:
        assert _runs(config, job) == []
