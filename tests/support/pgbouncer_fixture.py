"""A real PgBouncer (transaction or session pooling) before the test PostgreSQL, for pooler tests.

Import the `pgbouncer` (or `pgbouncer_session`) fixture into a test module. It finds
`pgbouncer` on PATH or installs the Debian package; writes its own ini and userlist in a
temporary folder; starts it as a daemon on a free loopback port (as root it runs as the
`postgres` user, since PgBouncer refuses to run as root); yields a URL for the `pg_url`
server's database through it; and stops it by its pid. It skips with the reason when
PgBouncer cannot be had or the test PostgreSQL has no TCP port (the embedded one), except
under CI=true, where that fails.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from lockconsole.config.urls import parse_url

from tests.support.helpers import unavailable

# A login role a test may create for itself, to come through PgBouncer as an account without
# privileges: unique per test session (roles are shared by every database of the server).
PGBOUNCER_VIEWER = f"lc_pgb_viewer_{uuid.uuid4().hex[:8]}"
# users PgBouncer lets in (auth_type = trust checks only that the name is listed)
PGBOUNCER_USERS = ("postgres", "lockconsole_pgb_plain", PGBOUNCER_VIEWER)

# each running PgBouncer's log file, by the URL its fixture yielded
LOGS: dict[str, Path] = {}


def _unavailable(reason: str) -> None:
    unavailable(f"PgBouncer: {reason}")


def _find_or_install() -> str:
    """The pgbouncer binary's path, installing the Debian package if needed."""
    found = shutil.which("pgbouncer") or (
        "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None
    )
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        _unavailable("pgbouncer is not installed and apt-get cannot be used here")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "-q", "pgbouncer"]
    done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], capture_output=True, env=env, timeout=600)
        done = subprocess.run(install, capture_output=True, text=True, env=env, timeout=600)
    found = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
    if done.returncode != 0 or not os.access(found, os.X_OK):
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["?"]
        _unavailable(f"apt-get install pgbouncer failed: {tail[0]}")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_listening(port: int, pid_file: Path, log: Path, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:  # daemonized: it may listen before it writes its pid file
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                if pid_file.exists() and pid_file.read_text().strip():
                    return
        except OSError:
            pass
        time.sleep(0.05)
    text = log.read_text(errors="replace") if log.exists() else "(no log)"
    raise RuntimeError(f"PgBouncer did not listen on {port} (pid file {pid_file}): {text}")


def _write_config(
    folder: Path, port: int, host: str, pg_port: int, dbname: str, mode: str, pool: str
) -> Path:
    ini = folder / "pgbouncer.ini"
    users = "".join(f'"{u}" ""\n' for u in PGBOUNCER_USERS)
    (folder / "userlist.txt").write_text(users)
    ini.write_text(
        "[databases]\n"
        f"{dbname} = host={host} port={pg_port} dbname={dbname}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {folder / 'userlist.txt'}\n"
        f"admin_users = postgres\npool_mode = {mode}\nserver_reset_query_always = 0\n"
        f"{pool}max_client_conn = 100\n"
        "ignore_startup_parameters = extra_float_digits,options\n"
        f"logfile = {folder / 'pgbouncer.log'}\npidfile = {folder / 'pgbouncer.pid'}\n"
    )
    return ini


@pytest.fixture(scope="session")
def pgbouncer(pg_url: str) -> Iterator[str]:
    """URL of the test database through a fresh PgBouncer in transaction pooling."""
    yield from _pgbouncer(pg_url, "transaction")


@pytest.fixture(scope="session")
def pgbouncer_one_server(pg_url: str) -> Iterator[str]:
    """Transaction pooling with a pool of ONE server connection, and a client that waits for
    one gives up after 10 s (query_wait_timeout): a client that needs a second server
    connection while it keeps the first fails in 10 s instead of hanging."""
    yield from _pgbouncer(pg_url, "transaction", "default_pool_size = 1\nquery_wait_timeout = 10\n")


@pytest.fixture(scope="session")
def pgbouncer_session(pg_url: str) -> Iterator[str]:
    """URL of the test database through a fresh PgBouncer in session pooling."""
    yield from _pgbouncer(pg_url, "session")


def _pgbouncer(pg_url: str, mode: str, pool: str = "default_pool_size = 4\n") -> Iterator[str]:
    target = parse_url(pg_url)
    if not target.host or target.host.startswith("/"):
        _unavailable(f"the test PostgreSQL ({target.masked}) has no TCP port for PgBouncer")
    binary = _find_or_install()
    folder = Path(tempfile.mkdtemp(prefix="lockconsole-pgbouncer-"))
    folder.chmod(0o755)
    port = _free_port()
    dbname = target.database or "test"
    ini = _write_config(folder, port, target.host or "", target.port or 5432, dbname, mode, pool)
    command = [binary, "-d", str(ini)]
    if os.geteuid() == 0:  # PgBouncer refuses root: run as postgres, which must own the folder
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            _unavailable("running as root and there is no 'postgres' user for PgBouncer")
        for path in (folder, *folder.iterdir()):
            os.chown(path, user.pw_uid, user.pw_gid)
        command[1:1] = ["-u", "postgres"]
    started = subprocess.run(command, capture_output=True, text=True, timeout=30)
    pid_file, log = folder / "pgbouncer.pid", folder / "pgbouncer.log"
    if started.returncode != 0:
        _unavailable(f"pgbouncer did not start: {(started.stderr or started.stdout).strip()}")
    _wait_listening(port, pid_file, log)
    pid = int(pid_file.read_text().strip())
    url = f"postgresql://postgres@127.0.0.1:{port}/{dbname}"
    LOGS[url] = log
    try:
        yield url
    finally:
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(100):
                os.kill(pid, 0)
                time.sleep(0.05)
        except ProcessLookupError:
            pass
        shutil.rmtree(folder, ignore_errors=True)
