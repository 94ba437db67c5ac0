"""A stop is honoured at every instant of an attempt, for `lockconsole run` and `schedule`.

Each test pauses a real `lockconsole` process at one named fault point (tests/support/barrier.py),
sends it SIGTERM there, lets it go, and checks: it exits because of the stop (long before its job
would end by itself; the exit-time figure is measured by tests/integration/test_stop_stress.py), the
lock is free when seen from another session, no attempt is left "acquired" in the ledger, and a job
that had not started never starts.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from lockconsole.engine import faultpoints as fp

from tests.support.barrier import Barrier
from tests.support.helpers import eventually, wait_for
from tests.support.runner_helpers import lockconsole, runs_of
from tests.support.settings import PYTHON
from tests.support.stop_helpers import STEPS, STUBBORN, alive, mysql_lock_holder, pg_lock_holder

GRACE = 2.0
# The job runs 60 s (or hangs on a silent database): an exit this soon after the signal was the
# stop's doing. A polling deadline, not a latency measurement: the README's figure (the slowest
# exit, stop_grace + 0.3 s) comes from tests/integration/test_stop_stress.py, which measures it.
STOPPED_BY_US = 30.0
NOT_STARTED = (fp.AFTER_ACQUIRE, fp.BEFORE_SPAWN, fp.AFTER_SPAWN)  # the lock held, no job yet
BEFORE_LOCK = (fp.CONNECTING, fp.BEFORE_TRY_LOCK)


def _config(write_config, url: str, job: str, strategy: str, key: int | None) -> Path:
    key_line = f"key = {key}\n" if key is not None else ""
    return write_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\ndatabase = "main"\n'
        f'strategy = "{strategy}"\nschedule = "* * * * * *"\nstop_grace = {GRACE}\n'
        f"watchdog_interval = 0.5\n{key_line}"
    )


@pytest.fixture(params=["pg", "mysql"])
def target(request, uid):
    """(url, strategy, key, holder()): a PostgreSQL session lock or a MariaDB GET_LOCK."""
    job = f"stop_{uid}"
    if request.param == "pg":
        url, conn = request.getfixturevalue("pg_url"), request.getfixturevalue("pg_conn")
        key = int(uid[:8], 16)
        return job, url, "pg-session", key, lambda: pg_lock_holder(conn, key)
    url, conn = request.getfixturevalue("mysql_url"), request.getfixturevalue("mysql_conn")
    return job, url, "mysql", None, lambda: mysql_lock_holder(conn, job)


@pytest.mark.parametrize("how", ["run", "schedule"])
@pytest.mark.parametrize("step", fp.ATTEMPT_POINTS)
def test_sigterm_at_each_step(step, how, target, write_config, cli_env, tmp_path):
    job, url, strategy, key, holder = target
    config = _config(write_config, url, job, strategy, key)
    marks = tmp_path / "marks"
    seconds = "0" if step == fp.BEFORE_RECORD else "60"  # before_record: the job has ended
    barrier = Barrier(tmp_path / "barrier", step, fp.STOP_REQUESTED)
    args = _job_args(how, config, job, STEPS, str(marks), seconds)
    proc = lockconsole(config, *args, env=barrier.env(cli_env))
    try:
        barrier.wait(step)
        if step == fp.JOB_STARTED:
            wait_for(marks.exists, what="the job to start")
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        barrier.wait(fp.STOP_REQUESTED)  # the process took the stop in, at `step`
        barrier.release(fp.STOP_REQUESTED)
        barrier.release(step)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.communicate()[1]
    assert took < STOPPED_BY_US, f"exited {took:.2f} s after SIGTERM: the stop did not end it"
    assert "Traceback" not in err, err
    assert holder() is None, "the lock is free, seen from another session"
    runs = runs_of(config, job) if step not in BEFORE_LOCK else _runs_if_any(config, job)
    outcomes = [r.outcome for r in runs]
    assert "acquired" not in outcomes, runs
    if how == "run":
        want = 0 if step == fp.BEFORE_RECORD else 128 + signal.SIGTERM
        assert code == want, err
    else:
        assert code == 0, err
    if step in BEFORE_LOCK:
        assert runs == [] and not marks.exists(), "nothing was recorded or run"
    elif step in NOT_STARTED:
        stopped = [r for r in runs if r.outcome == "failed"]
        assert len(stopped) == 1, runs
        message = stopped[0].message or ""
        assert "SIGTERM" in message and "before the job started" in message
        assert set(outcomes) <= {"failed", "skipped"}, runs
        assert not marks.exists(), "the job never started"
    elif step == fp.JOB_STARTED:
        assert "failed" in outcomes and set(outcomes) <= {"failed", "skipped"}, runs
        assert "finished" not in marks.read_text(), "the job was stopped"
    else:
        assert "succeeded" in outcomes, runs
        assert marks.read_text().count("finished") == outcomes.count("succeeded")


def _job_args(how: str, config, job: str, script: str, *script_args: str) -> list[str]:
    """The CLI arguments that run `python -c script *script_args` as the job, by `lockconsole
    run` (the command on its line) or by `lockconsole schedule` (the job's command in the
    config, for a scheduler that fires every second)."""
    if how == "run":
        return ["run", job, "--", PYTHON, "-c", script, *script_args]
    command = json.dumps([PYTHON, "-c", script, *script_args])
    text = config.read_text().replace("schedule = ", f"command = {command}\nschedule = ")
    config.write_text(text)
    return ["schedule", "--job", job]


def _runs_if_any(config, job):
    """The job's attempts; none at all if no ledger exists yet (a stop before the lock)."""
    try:
        return runs_of(config, job)
    except Exception as exc:  # a fresh database has no ledger table until a first attempt
        assert "lockconsole_runs" in str(exc) or "exist" in str(exc), exc
        return []


@pytest.mark.parametrize("how", ["run", "schedule"])
def test_kill9_of_the_runner_ends_its_job(how, pg_url, uid, write_config, cli_env, tmp_path):
    """The runner dies (SIGKILL): its job, which ignores SIGTERM, and the job's child go too."""
    job = f"orphan_{uid}"
    config = _config(write_config, pg_url, job, "pg-session", int(uid[:8], 16) + 7)
    pids_file = tmp_path / "pids"
    args = _job_args(how, config, job, STUBBORN, str(pids_file))
    proc = lockconsole(config, *args, env=cli_env)
    try:
        text = wait_for(lambda: pids_file.exists() and pids_file.read_text(), what="the job")
        pids = [int(p) for p in text.split()]
        assert all(alive(p) for p in pids)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        # the job would sleep 120 s and ignores SIGTERM: gone within the deadline means the
        # supervisor ended it (SIGTERM, then SIGKILL after stop_grace)
        eventually(lambda: not any(alive(p) for p in pids), STOPPED_BY_US)
        left = [p for p in pids if alive(p)]
    finally:
        for p in _read_pids(pids_file):
            if alive(p):
                os.kill(p, signal.SIGKILL)
    assert left == [], f"job processes {left} outlived the runner by {STOPPED_BY_US} s"


def _read_pids(path) -> list[int]:
    try:
        return [int(p) for p in path.read_text().split()]
    except (FileNotFoundError, ValueError):
        return []


@pytest.mark.parametrize("how", ["run", "schedule"])
def test_sigint_is_a_stop_too(how, pg_url, pg_conn, uid, write_config, cli_env, tmp_path):
    """Ctrl-C (SIGINT) once the lock is held: the job never starts, the attempt is recorded."""
    key = int(uid[:8], 16) + 21
    job = f"int_{uid}"
    config = _config(write_config, pg_url, job, "pg-session", key)
    marks = tmp_path / "marks"
    barrier = Barrier(tmp_path / "barrier", fp.AFTER_ACQUIRE, fp.STOP_REQUESTED)
    args = _job_args(how, config, job, STEPS, str(marks), "60")
    proc = lockconsole(config, *args, env=barrier.env(cli_env))
    try:
        barrier.wait(fp.AFTER_ACQUIRE)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        barrier.wait(fp.STOP_REQUESTED)
        barrier.release(fp.STOP_REQUESTED)
        barrier.release(fp.AFTER_ACQUIRE)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.communicate()[1]
    assert took < STOPPED_BY_US and "Traceback" not in err, (took, err)
    assert code == (128 + signal.SIGINT if how == "run" else 0), err
    assert pg_lock_holder(pg_conn, key) is None
    (failed,) = [r for r in runs_of(config, job) if r.outcome == "failed"]
    assert failed.message == "stopped by SIGINT: before the job started"
    assert "acquired" not in [r.outcome for r in runs_of(config, job)]
    assert not marks.exists()


class _Silent:
    """A TCP server that accepts connections and never answers: a database that hangs."""

    def __init__(self) -> None:
        import socket
        import threading

        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = threading.Event()
        self.conns: list[Any] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(conn)
            self.accepted.set()

    def close(self) -> None:
        self.sock.close()
        for conn in self.conns:
            conn.close()


@pytest.mark.parametrize("how", ["run", "schedule"])
def test_sigterm_while_blocked_connecting(how, pg_url, uid, write_config, cli_env, tmp_path):
    """The lock's database accepts the connection and never answers: SIGTERM still ends it."""
    silent = _Silent()
    job = f"hang_{uid}"
    marks = tmp_path / "marks"
    config = write_config(
        f'[lockconsole]\nledger_database = "ledger"\n'
        f'[databases.ledger]\nurl = "{pg_url}"\n'
        f'[databases.hang]\nurl = "postgresql://nobody@127.0.0.1:{silent.port}/x"\n'
        f'[jobs.{job}]\ndatabase = "hang"\nstrategy = "pg-session"\n'
        f'schedule = "* * * * * *"\nstop_grace = {GRACE}\n'
        f"command = {json.dumps([PYTHON, '-c', STEPS, str(marks), '60'])}\n"
    )
    args = ["run", job] if how == "run" else ["schedule", "--job", job]
    proc = lockconsole(config, *args, env=cli_env)
    try:
        assert silent.accepted.wait(60), "the runner connected"
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
        silent.close()
    err = proc.communicate()[1]
    assert took < STOPPED_BY_US, f"exited {took:.2f} s after SIGTERM: the stop did not end it"
    assert "Traceback" not in err, err
    assert code == (128 + signal.SIGTERM if how == "run" else 0), err
    assert _runs_if_any(config, job) == [] and not marks.exists()


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_while_schedule_starts_stops_it(sig, pg_url, uid, write_config, cli_env, tmp_path):
    """A SIGTERM (a rolling deploy) or SIGINT after `schedule` started its request server and
    journal sampler, before its loop: a clean stop (exit 0) that fires nothing, not a death by
    the signal."""
    job = f"starting_{uid}"
    config = _config(write_config, pg_url, job, "pg-session", None)
    marks = tmp_path / "marks"
    barrier = Barrier(tmp_path / "barrier", fp.SCHEDULE_STARTING)
    args = _job_args("schedule", config, job, STEPS, str(marks), "60")
    proc = lockconsole(config, *args, env=barrier.env(cli_env))
    try:
        barrier.wait(fp.SCHEDULE_STARTING)
        sent = time.monotonic()
        proc.send_signal(sig)
        barrier.release(fp.SCHEDULE_STARTING)
        code = proc.wait(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.communicate()[1]
    assert code == 0, (code, err)
    assert took < STOPPED_BY_US and "Traceback" not in err, (took, err)
    assert _runs_if_any(config, job) == [] and not marks.exists()
