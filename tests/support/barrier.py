"""Test side of lockconsole.engine.faultpoints: pause a real process at a named instant."""

from __future__ import annotations

import os
import time
from pathlib import Path


class Barrier:
    """Barriers for child processes: pass `env()` to them, then `wait(name)` and `release(name)`."""

    def __init__(self, folder: Path, *names: str) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.names = names

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ if base is None else base)
        env["LOCKCONSOLE_TEST_BARRIER_DIR"] = str(self.folder)
        env["LOCKCONSOLE_TEST_BARRIER_AT"] = ",".join(self.names)
        return env

    def wait(self, name: str, timeout: float = 60.0) -> int:
        """Block until a process reached `name`; return its pid."""
        reached = self.folder / f"{name}.reached"
        deadline = time.monotonic() + timeout
        while not reached.exists() or not reached.read_text():
            if time.monotonic() > deadline:
                raise AssertionError(f"no process reached fault point {name!r} in {timeout} s")
            time.sleep(0.005)
        return int(reached.read_text())

    def release(self, name: str) -> None:
        (self.folder / f"{name}.go").touch()
