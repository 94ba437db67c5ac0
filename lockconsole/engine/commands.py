"""Run a job's command as a child process that can be stopped: SIGTERM, then SIGKILL.

The command runs under a small supervisor process (lockconsole/engine/supervisor.py) that leads the
job's own process group and holds the read end of a pipe from us: the job starts only when we
say "go", and if this process dies (SIGKILL, the OOM killer) the supervisor sees the pipe close,
sends SIGTERM to the job's group and SIGKILLs it after the grace period. The job also gets
Linux's parent-death SIGKILL tied to the supervisor.

A stop may be requested at any instant, even before the child exists: it is remembered
(under a lock) and start() refuses to start the job, or stops it right after it exists.

The child's stdout and stderr always come through pipes: they are passed on as they arrive (to
our own stdout and stderr, or line by line to `output`) and their last TAIL_BYTES are kept in
`tail`, for the run ledger (which masks them, then keeps the last 64 KB).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lockconsole.backends.ledger.outputs import MASK_MARGIN, MAX_OUTPUT
from lockconsole.backends.threads import start_quiet
from lockconsole.engine import faultpoints

SUPERVISOR = str(Path(__file__).with_name("supervisor.py"))
# of a command's output (stdout and stderr, as they came) kept: what the ledger keeps and the
# margin it masks before its last cut (backends/ledger/outputs.py)
TAIL_BYTES = MAX_OUTPUT + MASK_MARGIN


class OutputTail:
    """The last `limit` bytes of an output written by several threads."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self._data = bytearray()
        self._dropped = 0
        self._lock = threading.Lock()

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._data += chunk
            over = len(self._data) - self.limit
            if over > 0:
                del self._data[:over]
                self._dropped += over

    def text(self) -> tuple[str | None, int]:
        """The tail as text (None when there was no output) and how many bytes were cut off
        before it (it may start inside a line, or inside a character)."""
        with self._lock:
            data, dropped = bytes(self._data), self._dropped
        if not data:
            return (None, 0) if not dropped else ("", dropped)
        return data.decode("utf-8", "replace"), dropped


def go_message(context: dict[str, str]) -> bytes:
    """The supervisor's "go": b"g", the payload's length in 8 hex digits, then NAME=VALUE\\0..."""
    payload = b"".join(f"{k}={v}".encode() + b"\0" for k, v in context.items())
    return b"g" + b"%08x" % len(payload) + payload


def _send_all(fd: int, data: bytes) -> None:
    while data:
        data = data[os.write(fd, data) :]


class Command:
    """A child process in its own process group, so stopping it stops its children too."""

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        output: Callable[[str], None] | None = None,
        grace: float = 10.0,
        stdout_fd: int = 1,
    ) -> None:
        self.argv = list(argv)
        self.stdout_fd = stdout_fd  # where the job's stdout goes (2 when ours carries JSON)
        self.proc: subprocess.Popen[bytes] | None = None
        self.env = env
        self.output = output  # None: the child writes to our stdout/stderr
        self.grace = grace  # how long the supervisor waits for the job if we die
        self.stop_reason: str | None = None
        self.start_error: str | None = None  # set by wait() when the command could not start
        self._lock = threading.RLock()  # re-entrant: a signal handler may stop() inside start()
        self._readers: list[threading.Thread] = []
        self.tail = OutputTail()
        self._ctl: int | None = None  # our end of the supervisor's pipe: "go", or closed
        self._status: int | None = None  # the supervisor's report of a failed start
        self._killing = False
        self.job_started = False  # "go" was sent: the job started (or a stop raced it)

    def prepare(self) -> None:
        """Start the supervisor now, waiting for "go": its interpreter starts while we connect.

        The job itself starts only in start(); discard() (or our death) ends the supervisor
        without it ever starting the job.
        """
        with self._lock:
            if self.stop_reason or self.proc is not None:
                return
        self._spawn()

    def _spawn(self) -> None:
        ctl_r, ctl_w = os.pipe()
        status_r, status_w = os.pipe()
        fds = [str(ctl_r), str(status_w), str(self.grace)]
        argv = [sys.executable, "-I", "-S", SUPERVISOR, *fds, "--", *self.argv]
        piped = self.output is not None
        try:
            proc = subprocess.Popen(
                argv,
                start_new_session=True,
                env=self.env,
                pass_fds=(ctl_r, status_w),
                stdin=subprocess.DEVNULL if piped else None,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT if piped else subprocess.PIPE,
            )
        except BaseException:
            for fd in (ctl_r, ctl_w, status_r, status_w):
                os.close(fd)
            raise
        os.close(ctl_r)
        os.close(status_w)
        self._ctl, self._status = ctl_w, status_r
        if self.output is not None:
            self._readers = [threading.Thread(target=self._pump, args=(proc,), daemon=True)]
        else:
            self._readers = [
                threading.Thread(target=self._relay, args=(pipe, fd), daemon=True)
                for pipe, fd in ((proc.stdout, self.stdout_fd), (proc.stderr, 2))
            ]
        for reader in self._readers:
            start_quiet(reader)
        with self._lock:
            self.proc = proc

    def start(self, context: dict[str, str] | None = None) -> None:
        """Start the job unless a stop came first (then `job_started` stays False).

        `context` (the attempt's `LOCKCONSOLE_*` variables) is added to the job's environment:
        the supervisor was started before the lock, so it gets them with its "go".
        """
        with self._lock:
            stopped = bool(self.stop_reason)
        if stopped:
            self._terminate()  # a prepared supervisor ends without starting the job
            return
        faultpoints.reach(faultpoints.BEFORE_SPAWN)
        if self.proc is None:
            self._spawn()
        with self._lock:
            go = not self.stop_reason
        faultpoints.reach(faultpoints.AFTER_SPAWN)
        with self._lock:
            go = go and not self.stop_reason
            if go and self._ctl is not None:
                try:
                    _send_all(self._ctl, go_message(context or {}))
                except BrokenPipeError:  # the supervisor was stopped meanwhile
                    pass
        if not go:
            self._terminate()  # the supervisor exits without starting the job
            return
        self.job_started = True
        faultpoints.reach(faultpoints.JOB_STARTED)

    def discard(self) -> None:
        """A prepared supervisor that will not be told "go": it exits on its own, job unstarted.

        Closing our end of its pipe is the signal; we do not wait for its exit.
        """
        with self._lock:
            if self.job_started or self.proc is None or self._ctl is None:
                return
            self.stop_reason = self.stop_reason or "not started"
            os.close(self._ctl)
            self._ctl = None
            if self._status is not None:
                os.close(self._status)
                self._status = None

    def _pump(self, proc: subprocess.Popen[bytes]) -> None:
        """Hand each line of the child's output (stdout and stderr) to `output`."""
        assert proc.stdout is not None and self.output
        for raw in proc.stdout:
            self.tail.add(raw)
            self.output(raw.decode("utf-8", "replace").rstrip("\n"))

    def _relay(self, pipe: Any, fd: int) -> None:
        """Pass one of the child's streams on to our own `fd` as it comes, keeping its tail."""
        while chunk := os.read(pipe.fileno(), 65536):
            self.tail.add(chunk)
            try:
                while chunk:
                    chunk = chunk[os.write(fd, chunk) :]
            except OSError:  # our own stream is closed: the tail is still kept
                pass

    def wait(self) -> int:
        """The job's exit code; a death by signal N is 128 + N, as shells report it."""
        assert self.proc is not None
        code = self.proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)  # a background child may keep the pipe open: not waited for
        if not any(reader.is_alive() for reader in self._readers):
            for pipe in (self.proc.stdout, self.proc.stderr):
                if pipe is not None:
                    pipe.close()
        self._close_pipes()
        return 128 - code if code < 0 else code

    def _close_pipes(self) -> None:
        if self._status is not None:
            report = os.read(self._status, 4096).decode("utf-8", "replace")
            if report.startswith("error "):
                self.start_error = f"cannot start {self.argv[0]}: {report[6:]}"
            os.close(self._status)
            self._status = None
        if self._ctl is not None:
            os.close(self._ctl)  # the supervisor has exited: nothing reads it any more
            self._ctl = None

    def stop(self, reason: str, grace: float) -> None:
        """SIGTERM the process group, then SIGKILL it after `grace` seconds (in a thread).

        Before the child exists, the stop is remembered: start() then does not start it.
        """
        with self._lock:
            if self.stop_reason or (self.proc is not None and self.proc.returncode is not None):
                return  # stopped already, or ended (and waited for) before the stop came
            self.stop_reason = reason
            self.grace = grace
            if self.proc is None:
                return
        self._terminate()

    def _terminate(self) -> None:
        with self._lock:
            if self._killing or self.proc is None or self.proc.poll() is not None:
                return
            self._killing = True
        self._signal(signal.SIGTERM)
        start_quiet(threading.Thread(target=self._kill_after, args=(self.grace,), daemon=True))

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
