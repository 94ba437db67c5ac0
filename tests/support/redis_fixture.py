"""A private redis-server for the Redis tests, so a test may restart it.

Import the fixtures into a test module (importing `redis_url_fixture` registers `redis_url`,
and so on). `redis_server` (one per session) is started from
Debian's redis-server binary on a free loopback port, without persistence, in a temporary
folder; `redis_url` is $LOCKCONSOLE_TEST_REDIS_URL when set, else that server's URL.
`private_redis` is a server of the test's own (for restarting it mid-run). A missing binary
skips with the reason, except under CI=true, where it fails.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.config import config_toml
from tests.support.helpers import unavailable

REDIS_SERVER = "/usr/bin/redis-server"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """One redis-server process without persistence: a restart loses every key."""

    def __init__(self, folder: Path) -> None:
        binary = REDIS_SERVER if os.access(REDIS_SERVER, os.X_OK) else shutil.which("redis-server")
        if not binary:
            reason = "redis-server is not installed (Debian package redis-server)"
            unavailable(reason)
        self.binary, self.folder, self.port = binary, folder, _free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--daemonize",
            "no",
            "--logfile",
            str(self.folder / "redis.log"),
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = (self.folder / "redis.log").read_text(errors="replace")[-500:]
                raise RuntimeError(f"redis-server on port {self.port} did not start: {log}")
            time.sleep(0.02)

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=1) as s:
                s.sendall(b"PING\r\n")
                return s.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        """Kill the server (by its own pid): nothing is saved."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)
        self.proc = None

    def restart(self) -> None:
        """Kill and start again on the same port: every key (and loaded script) is gone."""
        self.stop()
        self.start()


@pytest.fixture(scope="session", name="redis_server")
def redis_server_fixture() -> Iterator[RedisServer]:
    with tempfile.TemporaryDirectory(prefix="lockconsole-redis-") as folder:
        server = RedisServer(Path(folder))
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session", name="redis_url")
def redis_url_fixture(request: pytest.FixtureRequest) -> str:
    """$LOCKCONSOLE_TEST_REDIS_URL, else the session's private server (started on first use)."""
    return (
        os.environ.get("LOCKCONSOLE_TEST_REDIS_URL") or request.getfixturevalue("redis_server").url
    )


@pytest.fixture(name="private_redis")
def private_redis_fixture(tmp_path: Path) -> Iterator[RedisServer]:
    """A server of this test's own, free to be restarted."""
    folder = tmp_path / "redis"
    folder.mkdir()
    server = RedisServer(folder)
    try:
        yield server
    finally:
        server.stop()


def redis_job_config(ledger_url: str, redis_url: str, job: str, **extra: Any) -> str:
    """A config with a SQL ledger and one redis job on `redis_url`."""
    return config_toml(
        lockconsole={"ledger_database": "ledger"},
        databases={"ledger": ledger_url, "cache": redis_url},
        jobs={job: {"database": "cache", "strategy": "redis", "schedule": "0 2 * * *", **extra}},
    )
