"""The job's supervisor: a tiny process between the runner and a command job (stdlib only).

Run as a script (`python -I -S supervisor.py CTL STATUS GRACE -- ARGV...`), never imported by
lockconsole. It is the leader of the job's own process group and exists so that the job dies
with the runner, however the runner dies (SIGKILL, the OOM killer, a crash):

- CTL is the read end of a pipe whose only write end the runner holds (never inherited by
  other children). The supervisor starts the job only after reading "go" from it (a "g", then
  the attempt's LOCKCONSOLE_* variables for the job's environment, length-prefixed), so a
  stop requested before that instant means the job never starts. End of file on it means the
  runner process is gone: the supervisor sends SIGTERM to the job's process group, waits up to
  GRACE seconds for the job, then SIGKILLs the whole group (itself included). A pipe is used
  rather than a parent-death signal on the supervisor because Linux sends that signal when
  the *thread* that forked exits, and the scheduler forks from short-lived job threads; a
  pipe's write end closes only when the whole runner process is gone.
- The job itself gets the parent-death signal SIGKILL (Linux prctl PR_SET_PDEATHSIG), so if
  the supervisor (single-threaded) is killed on its own, the job dies with it.
- A SIGTERM to the group (the runner's stop) reaches the job; the supervisor survives it and
  reports the job's exit. If it arrives before the job started, the job is never started.
- STATUS is the write end of a pipe to the runner: "error <message>" if the command cannot
  be started (the supervisor then exits 127).

Exit code: the job's, or 128 + N when the job died of signal N (as shells report it).
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

TYPE_CHECKING = False  # not typing's: this script starts without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable

STOPPED_BEFORE_START = 128 + signal.SIGTERM
_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    """libc's prctl on Linux (loaded before the fork: the child must not import)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl
    except Exception:
        return None


_PRCTL = _prctl()


def _die_with_parent() -> None:
    """In the job (between fork and exec): SIGKILL it if the supervisor dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _in_child(keep_out: tuple[int, ...]) -> None:
    """Between fork and exec: the job starts with default signals and none of our pipes."""
    for fd in keep_out:
        os.close(fd)
    # a SIGTERM sent to the group while the job was between fork and exec is pending here;
    # with the default action restored it ends the job before exec instead of being lost
    for sig in (signal.SIGTERM, signal.SIGCHLD, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)  # SIGPIPE and SIGXFSZ: Python ignores them
    _die_with_parent()
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def _spawn(argv: list[str], keep_out: tuple[int, ...]) -> int:
    """fork + exec the job (lighter than importing subprocess); OSError if exec failed."""
    err_r, err_w = os.pipe()  # close-on-exec: end of file here means the exec worked
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.close(err_r)
            _in_child(keep_out)
            os.execvp(argv[0], argv)
        except BaseException as exc:
            try:
                errno = getattr(exc, "errno", None) or 0
                os.write(err_w, f"{errno} {exc}".encode("utf-8", "replace"))
            finally:
                os._exit(127)
    os.close(err_w)
    chunks = []
    while chunk := os.read(err_r, 4096):
        chunks.append(chunk)
    os.close(err_r)
    if chunks:
        os.waitpid(pid, 0)
        errno, _, text = b"".join(chunks).decode("utf-8", "replace").partition(" ")
        raise OSError(int(errno) if errno.isdigit() else 0, text)
    return pid


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None  # the runner went away mid-message
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_context(ctl: int) -> dict[str, str] | None:
    """The LOCKCONSOLE_* variables sent after "go": 8 hex digits of length, NAME=VALUE\\0 ..."""
    head = _read_exactly(ctl, 8)
    if head is None:
        return None
    payload = _read_exactly(ctl, int(head, 16))
    if payload is None:
        return None
    context = {}
    for entry in payload.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            context[name.decode("utf-8", "surrogateescape")] = value.decode(
                "utf-8", "surrogateescape"
            )
    return context


def main(args: list[str]) -> int:
    ctl, status, grace = int(args[0]), int(args[1]), float(args[2])
    argv = args[4:]
    term = [False]

    def on_term(_signum: int, _frame: object) -> None:
        term[0] = True

    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGCHLD, lambda _s, _f: None)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # a runner thread may block it

    while not term[0]:  # wait for "go" from the runner
        ready, _, _ = select.select([ctl, wake_r], [], [])
        if ctl in ready:
            data = os.read(ctl, 1)
            if not data:
                return STOPPED_BEFORE_START  # the runner is gone: never start the job
            context = _read_context(ctl)
            if context is None:
                return STOPPED_BEFORE_START
            os.environ.update(context)
            break
        if wake_r in ready:
            os.read(wake_r, 512)
    if term[0]:
        return STOPPED_BEFORE_START

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    if term[0] or signal.SIGTERM in signal.sigpending():
        return STOPPED_BEFORE_START
    try:
        job = _spawn(argv, (ctl, status))
    except OSError as exc:
        os.write(status, f"error {exc.strerror or exc}".encode("utf-8", "replace"))
        return 127
    finally:
        os.close(status)
    if signal.SIGTERM in signal.sigpending():
        # the stop reached only us, before the job existed: pass it on now that it does
        os.killpg(0, signal.SIGTERM)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})

    orphaned_at: float | None = None
    while True:
        done, wait_status = os.waitpid(job, os.WNOHANG)
        if done:
            code = os.waitstatus_to_exitcode(wait_status)
            break
        timeout = 1.0 if orphaned_at is None else max(0.0, orphaned_at + grace - time.monotonic())
        if orphaned_at is not None and timeout == 0.0:
            os.killpg(0, signal.SIGKILL)  # the job ignored SIGTERM: end the whole group
        watched = [wake_r] if orphaned_at is not None else [ctl, wake_r]  # EOF stays readable
        ready, _, _ = select.select(watched, [], [], min(timeout, 1.0))
        if wake_r in ready:
            os.read(wake_r, 512)
        if ctl in ready and not os.read(ctl, 64):
            orphaned_at = time.monotonic()  # the runner died: stop the job, then kill it
            os.killpg(0, signal.SIGTERM)
    if orphaned_at is not None:
        os.killpg(0, signal.SIGKILL)  # leave nothing of the job behind an orphaned run
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
