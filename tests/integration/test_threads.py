"""Threads lockconsole starts block SIGINT and SIGTERM, so the kernel hands both to the main
thread, whose Python handlers then run at once (a helper thread taking them delayed the handler
past the end of `holding_signals`: a Ctrl-C while run_once took its lock ran the body)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import pytest

from lockconsole import run_once
from lockconsole.backends.threads import start_quiet
from lockconsole.config.loader import parse_config

pytestmark = pytest.mark.usefixtures("empty_registry")


def blocked(native_id: int) -> set[int]:
    """The signals a thread of this process blocks, from /proc (SigBlk: a hex mask)."""
    status = Path(f"/proc/self/task/{native_id}/status").read_text()
    mask = int(next(ln for ln in status.splitlines() if ln.startswith("SigBlk:")).split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def test_start_quiet_blocks_both_in_the_thread_and_leaves_the_starter_as_it_was() -> None:
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    seen: list[set[int]] = []
    thread = threading.Thread(target=lambda: seen.append(blocked(threading.get_native_id())))
    start_quiet(thread)
    thread.join()
    assert {signal.SIGINT, signal.SIGTERM} <= seen[0]
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before


def test_the_run_paths_threads_block_sigint_and_sigterm(pg_url: str, uid: str) -> None:
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.th_{uid}]\nstrategy = "pg-session"\n'
        "watchdog_interval = 0.05\n"
    )
    with run_once(f"th_{uid}", config=config) as run:
        assert run.acquired, run.run.message
        ours = {
            t.name: t.native_id for t in threading.enumerate() if t.name.startswith("lockconsole")
        }
        # the socket watch and the watchdog's ticker run while a lock is held
        assert {"lockconsole-sockets", "lockconsole-watchdog-ticker"} <= set(ours), ours
        for name, native_id in ours.items():
            assert native_id is not None
            assert {signal.SIGINT, signal.SIGTERM} <= blocked(native_id), name


IMPORTS_FIRST = """
import sys, threading
from lockconsole.config.loader import parse_config
from lockconsole.serving import RequestServer

config = parse_config(
    '[databases.main]\\nurl = "sqlite:///' + sys.argv[1] + '"\\n'
    '[jobs.nightly]\\nstrategy = "lease"\\nschedule = "0 2 * * *"\\n'
)
assert "sqlalchemy" not in sys.modules  # nothing imported it yet
seen = []
start = threading.Thread.start
def recording(self):
    seen.append("sqlalchemy" in sys.modules and "lockconsole.backends.lease.lock" in sys.modules)
    start(self)
threading.Thread.start = recording
server = RequestServer(config, list(config.jobs.values()), instance="web-1").start()
server.stop(wait=5)
print(seen[0])
"""


def test_the_request_server_imports_sqlalchemy_before_its_thread_starts(tmp_path: Path) -> None:
    """SQLAlchemy imports its modules in cycles: the serving thread (a SQLite ledger) and the
    scheduler (a lease job) importing it at once failed once in CI with "deadlock detected by
    _ModuleLock". start() imports it, and the jobs' run path, before its thread exists."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", IMPORTS_FIRST, str(tmp_path / "ledger.db")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "True", done.stdout + done.stderr


def test_a_forked_child_starts_its_own_deadline_threads() -> None:
    """A process forked after an attempt (the racers of a fleet, a pre-forking server) has none
    of its parent's threads: its within() calls and DEADLINES must not wait on them (a call
    handed to the parent's idle worker never ran and was always overdue, and no deadline
    fired, so a hung peer could hold the child for ever)."""
    import os

    from lockconsole.engine.closing import DEADLINES, within

    assert within(5, lambda: 1, "in the parent") == 1
    with DEADLINES.bound(5, lambda: None):
        pass
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report on the pipe, never return into pytest
        try:
            ran = within(3, lambda: "ran", "in the child")
            fired = threading.Event()
            with DEADLINES.bound(0.1, fired.set):
                fired.wait(3)
            os.write(write, f"{ran} {fired.is_set()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as answer:
        said = answer.read()
    os.waitpid(pid, 0)
    assert said == "ran True"
