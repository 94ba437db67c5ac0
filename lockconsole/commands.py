"""Run a job's command as a child process that can be stopped: SIGTERM, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Sequence


class Command:
    """A child process in its own process group, so stopping it stops its children too."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = env
        self.stop_reason: str | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the child; OSError (not found, not executable) propagates."""
        self.proc = subprocess.Popen(self.argv, start_new_session=True, env=self.env)

    def wait(self) -> int:
        """The child's exit code; a death by signal N is 128 + N, as shells report it."""
        assert self.proc is not None
        code = self.proc.wait()
        return 128 - code if code < 0 else code

    def stop(self, reason: str, grace: float) -> None:
        """SIGTERM the process group, then SIGKILL it after `grace` seconds (in a thread)."""
        with self._lock:
            if self.proc is None or self.proc.poll() is not None or self.stop_reason:
                return
            self.stop_reason = reason
        self._signal(signal.SIGTERM)
        threading.Thread(target=self._kill_after, args=(grace,), daemon=True).start()

    def _kill_after(self, grace: float) -> None:
        assert self.proc is not None
        try:
            self.proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
