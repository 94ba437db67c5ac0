"""A peer on the way to the database that keeps the socket open, takes every byte and never
answers (a hung sidecar proxy, pooler or NAT box), played by the test's own proxy between one
`lockconsole run` and the real PostgreSQL:

- with the holder's session then ended on the server, another instance can take the lock: the
  first runner's check gets no answer within `lock_check_timeout`, so its job is stopped as on a
  lost lock, the runner exits, the ledger says lock_lost with the job's real end, and the next
  slot runs;
- with the session left alive, the runner ends its own stuck session from a fresh connection,
  so the lock does not stay held by a session nobody drives;
- SIGTERM while every statement hangs ends the runner within stop_grace + 2 s.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from tests.support.helpers import eventually
from tests.support.tcp_proxy import SwitchableProxy

# the job: its pid, then a heartbeat (the time) every 50 ms until SIGTERM ends it; each beat
# appears whole (written aside, then renamed), so a kill in the middle of one leaves the last
JOB = (
    "import os, pathlib, sys, time\n"
    "out = pathlib.Path(sys.argv[1])\n"
    "(out / 'pid').write_text(str(os.getpid()))\n"
    "while True:\n"
    "    (out / 'beat.tmp').write_text(repr(time.time()))\n"
    "    (out / 'beat.tmp').replace(out / 'beat')\n"
    "    time.sleep(0.05)\n"
)
SLOT, NEXT_SLOT = "2026-11-29T02:00:00+00:00", "2026-11-30T02:00:00+00:00"
CHECK_TIMEOUT, STOP_GRACE, INTERVAL = 1.0, 2.0, 0.5


def through(url: str, port: int) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@pytest.fixture
def proxy(pg_url: str):
    parts = urlsplit(pg_url)
    peer = SwitchableProxy((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield peer
    peer.close()


def config(write_config, url: str, job: str, tmp_path: Path, interval: float = INTERVAL) -> Path:
    script = tmp_path / "job.py"
    script.write_text(JOB, encoding="utf-8")
    return write_config(
        f"""
        [databases.main]
        url = "{url}"
        [jobs.{job}]
        strategy = "pg-session"
        key = "{job}"
        watchdog_interval = {interval}
        lock_check_timeout = {CHECK_TIMEOUT}
        stop_grace = {STOP_GRACE}
        allow_pooler = true  # the proxy is not a pooler: a sidecar that forwards one session
        command = ["{sys.executable}", "{script}", "{tmp_path}"]
        """
    )


def start(config_path: Path, job: str, slot: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config_path), "run", job,
         "--slot", slot, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def holder_pid(pg_url: str, job: str) -> int | None:
    """The backend holding the job's advisory lock (its key is the job's name, hashed)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE application_name LIKE %s AND pid IN"
            " (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted)",
            (f"lockconsole:{job}@%",),
        ).fetchone()
    return None if row is None else int(row[0])


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_a_swallowed_check_stops_the_job_and_the_next_slot_runs(
    pg_url, proxy, uid, write_config, cli_env, tmp_path
):
    job = f"hung_{uid}"
    hung = config(write_config, through(pg_url, proxy.port), job, tmp_path)
    runner = start(hung, job, SLOT, cli_env)
    try:
        eventually(lambda: (tmp_path / "beat").exists() or runner.poll() is not None, timeout=60)
        assert runner.poll() is None, runner.communicate()
        job_pid = int((tmp_path / "pid").read_text())
        backend = eventually(lambda: holder_pid(pg_url, job), timeout=30)
        proxy.stall()  # from now on the runner's connection hears nothing
        with psycopg.connect(pg_url, autocommit=True) as admin:  # the server ends the session
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        ended = time.monotonic()
        out, err = runner.communicate(timeout=60)
        took = time.monotonic() - ended
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 4, err  # the lock was lost while the job ran
    # a correctness bound (it hung for ever before): a check every INTERVAL, its deadline, grace
    assert took < INTERVAL * 1.25 + CHECK_TIMEOUT + STOP_GRACE + 10, (took, err)
    assert not pid_alive(job_pid), "the job outlived its runner"
    last_beat = float((tmp_path / "beat").read_text())
    run = json.loads(out)
    assert run["outcome"] == "lock_lost" and "no answer" in err
    with psycopg.connect(pg_url, autocommit=True) as conn:
        finished = conn.execute(
            "SELECT extract(epoch FROM finished_at) FROM lockconsole_runs WHERE id = %s",
            (run["id"],),
        ).fetchone()
    assert finished is not None and finished[0] is not None  # its real end, not unknown
    assert float(finished[0]) >= last_beat - 0.5  # not before the job's last sign of life

    direct = config(write_config, pg_url, job, tmp_path)
    (tmp_path / "beat").unlink()
    following = start(direct, job, NEXT_SLOT, cli_env)
    try:
        eventually(lambda: (tmp_path / "beat").exists(), timeout=60)  # the next slot runs
    finally:
        following.send_signal(signal.SIGTERM)
        following.communicate(timeout=60)


def test_a_stuck_session_is_ended_from_a_fresh_connection(
    pg_url, proxy, uid, write_config, cli_env, tmp_path
):
    job = f"stuck_{uid}"
    hung = config(write_config, through(pg_url, proxy.port), job, tmp_path)
    runner = start(hung, job, SLOT, cli_env)
    try:
        eventually(lambda: (tmp_path / "beat").exists(), timeout=60)
        backend = eventually(lambda: holder_pid(pg_url, job), timeout=30)
        proxy.stall()  # the server's session stays alive, held open by the peer
        out, err = runner.communicate(timeout=60)
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 4, err
    assert "stuck session ended" in err
    assert holder_pid(pg_url, job) is None  # the lock is free: nobody holds it
    with psycopg.connect(pg_url, autocommit=True) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,))
        assert gone.fetchone() == (0,)


def test_sigterm_ends_the_runner_while_every_statement_hangs(
    pg_url, proxy, uid, write_config, cli_env, tmp_path
):
    job = f"term_{uid}"
    # a watchdog that would not look before the end: only the stop path is under test
    hung = config(write_config, through(pg_url, proxy.port), job, tmp_path, interval=300)
    runner = start(hung, job, SLOT, cli_env)
    try:
        eventually(lambda: (tmp_path / "beat").exists(), timeout=60)
        proxy.stall()
        runner.send_signal(signal.SIGTERM)
        asked = time.monotonic()
        _, err = runner.communicate(timeout=60)
        took = time.monotonic() - asked
    finally:
        if runner.poll() is None:
            runner.kill()
    assert runner.returncode == 143, err
    assert took < STOP_GRACE + 2 + 1.5, (took, err)  # the promise, with a little room for CI


def test_a_kept_session_the_peer_silenced_is_cut_and_replaced(pg_url, proxy, uid, monkeypatch):
    """`schedule` keeps its lock session between attempts: when the peer goes silent between two
    of them, the next attempt's try-lock is cut loose at its deadline, a fresh session takes
    over, and the job runs (instead of that attempt waiting for ever)."""
    from lockconsole.config.loader import parse_config
    from lockconsole.engine import runner
    from lockconsole.engine.execute import run_target
    from lockconsole.engine.sessions import SessionRegistry

    monkeypatch.setattr(runner, "DECIDE_SECONDS", 1.5)
    job = f"kept_{uid}"
    cfg = parse_config(
        f'[databases.main]\nurl = "{through(pg_url, proxy.port)}"\n[jobs.{job}]\n'
        f'strategy = "pg-session"\nallow_pooler = true\ncommand = ["true"]\n',
        "<test>",
    )
    the_job, database = cfg.job(job), cfg.databases["main"]
    sessions = SessionRegistry()
    try:
        first = runner.begin(the_job, database, database, instance="web-1", sessions=sessions,
                             slot=runner.utcnow().replace(second=0, microsecond=0))  # fmt: skip
        assert run_target(first, ["true"], handle_signals=False).outcome == "succeeded"
        proxy.stall()  # the kept session now hears nothing, and answers nothing
        began = time.monotonic()
        second = runner.begin(the_job, database, database, instance="web-1", sessions=sessions,
                              trigger="manual")  # fmt: skip
        took = time.monotonic() - began
        assert second.acquired and 1.5 <= took < 10, (took, second.run.outcome, second.run.message)
        assert run_target(second, ["true"], handle_signals=False).outcome == "succeeded"
    finally:
        sessions.close_all()


def test_a_lost_locks_outcome_is_written_on_a_fresh_connection_when_the_peer_holds_the_old(
    pg_url, proxy, uid
):
    """A Python job (run_once) behind a peer that goes silent, its session then ended on the
    server: the ledger's own connection is behind the same peer, so the outcome write after the
    lost lock gets no answer there either. It is cut loose within the check's deadline and made
    on a fresh connection: the attempt ends in seconds (not at the finish's 30 s budget) and its
    row says lock_lost with its end, instead of staying "acquired" for the next attempt."""
    from lockconsole.api import run_once
    from lockconsole.config.loader import parse_config
    from lockconsole.model.errors import LockLostError

    job = f"silent_{uid}"
    cfg = parse_config(
        f'[databases.main]\nurl = "{through(pg_url, proxy.port)}"\n[jobs.{job}]\n'
        f'strategy = "pg-session"\nallow_pooler = true\nwatchdog_interval = {INTERVAL}\n'
        f"lock_check_timeout = {CHECK_TIMEOUT}\n",
        "<test>",
    )
    guard = run_once(job, config=cfg, instance="web-1", slot=datetime.fromisoformat(SLOT))
    with pytest.raises(LockLostError), guard as attempt:
        assert attempt.acquired
        backend = eventually(lambda: holder_pid(pg_url, job), timeout=30)
        proxy.stall()  # the lock's and the ledger's connections hear nothing from now on
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
        began = time.monotonic()
        while True:  # a cooperative job: it stops at its next look once the loss is seen
            attempt.check()
            time.sleep(0.02)
    took = time.monotonic() - began
    run = guard.attempt.run if guard.attempt is not None else None
    assert run is not None and run.outcome == "lock_lost", run
    # a check every INTERVAL, its deadline, the outcome write's deadline, with room for CI
    assert took < INTERVAL * 1.25 + 2 * CHECK_TIMEOUT + 5, took
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT outcome, finished_at FROM lockconsole_runs WHERE id = %s", (run.id,)
        ).fetchone()
    assert row is not None and row[0] == "lock_lost" and row[1] is not None, row


def test_the_job_is_told_of_the_loss_before_its_stuck_session_is_ended(
    pg_url, proxy, uid, monkeypatch
):
    """A check with no answer: the job learns its lock is lost at the check's deadline, not
    after the stuck server session is ended from a fresh connection (which can take seconds on
    a loaded machine, 3 s at most); that session is still ended before the attempt is over."""
    from lockconsole.api import run_once
    from lockconsole.backends.postgres.lock import PgSessionLock
    from lockconsole.config.loader import parse_config
    from lockconsole.model.errors import LockLostError

    slow_end = PgSessionLock.end_stuck_session

    def end_slowly(self, seconds):
        time.sleep(2.0)
        return slow_end(self, seconds)

    monkeypatch.setattr(PgSessionLock, "end_stuck_session", end_slowly)
    job = f"told_{uid}"
    cfg = parse_config(
        f'[databases.main]\nurl = "{through(pg_url, proxy.port)}"\n[jobs.{job}]\n'
        f'strategy = "pg-session"\nallow_pooler = true\nwatchdog_interval = {INTERVAL}\n'
        f"lock_check_timeout = {CHECK_TIMEOUT}\n",
        "<test>",
    )
    guard = run_once(job, config=cfg, instance="web-1", slot=datetime.fromisoformat(SLOT))
    with pytest.raises(LockLostError), guard as attempt:
        backend = eventually(lambda: holder_pid(pg_url, job), timeout=30)
        proxy.stall()  # the server's session stays alive, held open by the peer
        began = time.monotonic()
        attempt.lost.wait(30)
        told = time.monotonic() - began
        attempt.check()
    assert told < INTERVAL * 1.25 + CHECK_TIMEOUT + 1.5, told  # before the 2 s cleanup ended
    assert holder_pid(pg_url, job) is None  # the stuck session was ended all the same
    with psycopg.connect(pg_url, autocommit=True) as conn:
        gone = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (backend,))
        assert gone.fetchone() == (0,)
