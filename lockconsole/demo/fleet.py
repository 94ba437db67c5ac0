"""The simulated fleet: web-1..3 and the stale holder, each its own OS process.

All of them share one new process group (so a Ctrl-C in the terminal reaches only the demo,
which then stops them in order and records the outcomes), log to files in the state
directory, and watch their parent: if the demo dies without stopping them, they stop too.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import IO

from lockconsole.demo import INSTANCES
from lockconsole.demo.billing import PACE_ENV
from lockconsole.demo.stale import READY

STOP_WAIT = 15.0  # seconds an instance gets to finish its attempt after SIGTERM
READY_WAIT = 20.0  # seconds the stale holder gets to take its lock


class Fleet:
    """Start and stop the fleet's processes; stop() is safe to call more than once."""

    def __init__(
        self,
        config_path: Path,
        log_dir: Path,
        *,
        first_slot: datetime,
        pace: float,
        instances: tuple[str, ...] = INSTANCES,
    ) -> None:
        self.config_path = config_path
        self.log_dir = log_dir
        self.first_slot = first_slot
        self.pace = pace
        self.instances = instances
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.stale: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None
        self._logs: list[IO[bytes]] = []

    def start(self) -> None:
        """The stale holder first (it must hold its lock when the console opens), then web-N."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.stale = self._spawn(
            "stale-holder",
            "lockconsole.demo.stale",
            ["--config", str(self.config_path)],
            ready=True,
        )
        self._wait_ready(self.stale)
        for name in self.instances:
            args = [
                "--config",
                str(self.config_path),
                "--instance",
                name,
                "--first-slot",
                self.first_slot.isoformat(),
            ]
            self.processes[name] = self._spawn(name, "lockconsole.demo.instance", args)

    def pids(self) -> dict[str, int]:
        """Process ids by name (the instances and "stale-holder")."""
        found = {name: p.pid for name, p in self.processes.items()}
        if self.stale is not None:
            found["stale-holder"] = self.stale.pid
        return found

    def running(self) -> bool:
        """Whether any of the fleet's processes is still running."""
        procs = [*self.processes.values(), *([self.stale] if self.stale else [])]
        return any(p.poll() is None for p in procs)

    def stop_instances(self) -> None:
        """SIGTERM web-N: each finishes or stops its attempt and records it, then exits."""
        procs = list(self.processes.values())
        for proc in procs:
            _signal(proc, signal.SIGTERM)
        _reap(procs, STOP_WAIT)

    def stop(self) -> None:
        """Stop everything: the instances, then the stale holder (SIGKILL after a wait)."""
        self.stop_instances()
        if self.stale is not None:
            _signal(self.stale, signal.SIGTERM)
            _reap([self.stale], 5.0)
            if self.stale.stdout is not None:
                self.stale.stdout.close()
        for f in self._logs:
            f.close()
        self._logs.clear()

    def _spawn(
        self, name: str, module: str, args: list[str], *, ready: bool = False
    ) -> subprocess.Popen[bytes]:
        log = open(self.log_dir / f"{name}.log", "wb")  # noqa: SIM115 - closed by stop()
        self._logs.append(log)
        env = dict(os.environ)
        env.update(
            {
                "LOCKCONSOLE_CONFIG": str(self.config_path),
                PACE_ENV: f"{self.pace:.4f}",
                "LOCKCONSOLE_INSTANCE": name,
                "PYTHONUNBUFFERED": "1",
            }
        )
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if ready else log,
            stderr=log,
            env=env,
            process_group=0 if self.pgid is None else self.pgid,
        )
        if self.pgid is None:
            self.pgid = proc.pid
        return proc

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> None:
        import selectors

        assert proc.stdout is not None
        deadline = time.monotonic() + READY_WAIT
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if sel.select(timeout=0.2):
                    line = proc.stdout.readline().decode(errors="replace")
                    if line.startswith(READY):
                        return
                    if not line:
                        break
                if proc.poll() is not None:
                    break
        raise RuntimeError(f"the stale holder did not start (see {self.log_dir}/stale-holder.log)")


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if proc.poll() is None:
        try:
            proc.send_signal(sig)
        except ProcessLookupError:
            pass


def _reap(procs: list[subprocess.Popen[bytes]], timeout: float) -> None:
    """Wait up to `timeout` for `procs`, then SIGKILL the ones still there."""
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
