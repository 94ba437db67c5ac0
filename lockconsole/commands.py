"""Run a job's command as a child process that can be stopped: SIGTERM, then SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from collections.abc import Callable, Sequence


class Command:
    """A child process in its own process group, so stopping it stops its children too."""

    def __init__(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
                 output: Callable[[str], None] | None = None) -> None:  # fmt: skip
        self.argv = list(argv)
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = env
        self.output = output  # None: the child writes to our stdout/stderr
        self.stop_reason: str | None = None
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        """Start the child; OSError (not found, not executable) propagates."""
        if self.output is None:
            self.proc = subprocess.Popen(self.argv, start_new_session=True, env=self.env)
            return
        self.proc = subprocess.Popen(
            self.argv, start_new_session=True, env=self.env, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._pump, daemon=True)
        self._reader.start()

    def _pump(self) -> None:
        """Hand each line of the child's output (stdout and stderr) to `output`."""
        assert self.proc is not None and self.proc.stdout is not None and self.output
        for raw in self.proc.stdout:
            self.output(raw.decode("utf-8", "replace").rstrip("\n"))

    def wait(self) -> int:
        """The child's exit code; a death by signal N is 128 + N, as shells report it."""
        assert self.proc is not None
        code = self.proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=5)
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
