"""The console under trouble, driven by Pilot against real PostgreSQL (no mocks of databases).

(a) a silent database (a loopback port that accepts and never answers) next to a real one:
the first frame, key presses and the real database's holders never wait for it; (b) our own
embedded PostgreSQL stopped and started again under the open console: the banner, the kept
data, and fresh data after the restart, without restarting the app; (c) a loopback proxy cut
while the console's statement is in flight (blocked on a lock) and restored.

Thread workers are not awaited (a hung one would hang the test): each test polls the app
with `pilot.pause` up to a deadline.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import psycopg
import pytest
from textual.widgets import Static

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, parse_config
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.view import HoldersView

from tests.support.helpers import DEADLINE, sync, until
from tests.support.tcp_proxy import SwitchableProxy

SIZE = (110, 30)


def databases_config(uid: str, databases: dict[str, str], console: str = "") -> Config:
    text = f"[console]\n{console}\n"
    for name, url in databases.items():
        text += f"""
[databases.{name}]
url = "{url}"
[jobs.{name}_{uid}]
database = "{name}"
strategy = "pg-session"
"""
    return parse_config(text, "test.toml", {})


def holder_pids(app: LockConsoleApp, job: str) -> set[int]:
    rows = app.query_one(HoldersView).model.rows
    return {
        r.holder.pid
        for r in rows
        if r.holder and r.holder.job == job and r.holder.granted and r.holder.pid is not None
    }


def rendered(app: LockConsoleApp, widget: str) -> str:
    return str(app.query_one(widget, Static).render())


# --- (a) a silent database ---------------------------------------------------------------


class SilentPort:
    """127.0.0.1:<port> accepts every connection and never sends a byte."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.accepted: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(conn)  # kept open, never answered

    def hang_up(self) -> None:
        """Close the connections accepted so far (their connects fail at once); later ones
        are accepted and never answered again."""
        for conn in list(self.accepted):
            conn.close()

    def close(self) -> None:
        self.listener.close()
        for conn in self.accepted:
            conn.close()


@pytest.fixture
def silent() -> Iterator[SilentPort]:
    port = SilentPort()
    yield port
    port.close()


@sync
async def test_a_silent_database_never_holds_up_keys_or_the_other_database(
    pg_url, silent, uid, make_console
) -> None:
    silent_url = f"postgresql://postgres@127.0.0.1:{silent.port}/x"
    # the silent database's connects wait until the test hangs up on them: keys are pressed
    # meanwhile, however long the machine takes to answer them
    config = databases_config(
        uid, {"pg": pg_url, "silent": silent_url}, console='connect_timeout = "10m"'
    )
    job = f"pg_{uid}"
    holder = psycopg.connect(pg_url, autocommit=True)
    second = psycopg.connect(pg_url, autocommit=True)
    try:
        holder.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        console = make_console(config)
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            assert "loading" in rendered(app, "#status"), "the first frame is up, data follows"
            # the first snapshot waits on the silent port's connect timeout: keys still work
            assert app.refresh_started is not None and app.snapshot is None
            for key, effect in (
                ("2", lambda: app.focused is app.query_one(HoldersView)),
                ("g", lambda: app.group_by == "session"),
                ("p", lambda: app.paused),
                ("p", lambda: not app.paused),
            ):
                await pilot.press(key)
                await until(pilot, effect, DEADLINE, f"key {key!r} to take effect")
            assert app.snapshot is None, "the keys were answered while the database was pending"
            # the holders read and the ledger read of the silent database are both waiting
            await until(pilot, lambda: len(silent.accepted) >= 2, DEADLINE, "both connects")
            assert app.snapshot is None
            silent.hang_up()  # those connects fail now: the first snapshot can complete
            await until(pilot, lambda: holder_pids(app, job), DEADLINE, "the real holder")
            await until(pilot, lambda: "silent" in app.errors, DEADLINE, "the silent error")
            status = rendered(app, "#status")
            assert "silent ✖ down" in status and "pg ● ok" in status, status
            banner = app.query_one("#banner", Static)
            assert banner.has_class("-shown") and "⚠ silent:" in rendered(app, "#banner")
            assert "pg" not in app.errors
            # later snapshots no longer wait for it: a new holder shows, and fresh snapshots
            # keep coming while the silent database's new connects hang
            their_key = config.job(job).key.value
            assert isinstance(their_key, int)
            second.execute("select pg_advisory_lock(%s)", (their_key + 1,))
            pid2 = second.info.backend_pid
            await until(
                pilot,
                lambda: any(h.pid == pid2 for h in app.snapshot.holders),
                DEADLINE,
                "a new holder on the real database",
            )
            assert app.snapshot is not None
            taken = {app.snapshot.taken_at}

            def fresh_snapshots() -> bool:
                assert "silent" in app.errors, "the silent database stays down"
                taken.add(app.snapshot.taken_at)
                return len(taken) >= 4

            await until(pilot, fresh_snapshots, DEADLINE, "three more snapshots")
            # one holders read and one ledger read of the silent database at most, never more
            assert console.connections.calls.running() <= 2
            assert "silent" in app.errors and "pg" not in app.errors
    finally:
        holder.close()
        second.close()


# --- (b) our own PostgreSQL stopped and started ------------------------------------------


@sync
async def test_a_database_stopped_and_started_again_under_the_open_console(
    own_postgres, uid, make_console
) -> None:
    config = databases_config(uid, {"own": own_postgres.url})
    job = f"own_{uid}"
    key = config.job(job).key.value
    before = psycopg.connect(own_postgres.url, autocommit=True)
    before.execute("select pg_advisory_lock(%s)", (key,))
    pid = before.info.backend_pid
    app = LockConsoleApp(make_console(config), refresh=0.5)
    after = None
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: pid in holder_pids(app, job), DEADLINE, "the holder")
            banner = app.query_one("#banner", Static)
            assert not banner.has_class("-shown")
            own_postgres.stop()
            await until(pilot, lambda: "own" in app.errors, DEADLINE, "the error")
            await until(pilot, lambda: banner.has_class("-shown"), DEADLINE, "the banner")
            text = rendered(app, "#banner")
            assert "⚠ own:" in text and "last good data" in text and "old" in text, text
            assert pid in holder_pids(app, job), "the last good data is kept"
            assert app.query_one(HoldersView).dimmed
            assert "own ✖ down" in rendered(app, "#status")
            await pilot.press("g")  # still answering keys
            await until(pilot, lambda: app.group_by == "session", DEADLINE, "the g key")
            own_postgres.start()
            after = psycopg.connect(own_postgres.url, autocommit=True)
            after.execute("select pg_advisory_lock(%s)", (key,))
            new_pid = after.info.backend_pid
            await until(pilot, lambda: new_pid in holder_pids(app, job), DEADLINE, "fresh data")
            await until(pilot, lambda: not banner.has_class("-shown"), DEADLINE, "the banner to go")
            assert not app.errors and not app.query_one(HoldersView).dimmed
            assert pid not in holder_pids(app, job), "the old session died with the server"
    finally:
        before.close()
        if after is not None:
            after.close()


# --- (c) the connection cut while a statement is in flight -------------------------------


@sync
async def test_a_cut_while_a_statement_is_in_flight_recovers(
    own_postgres, uid, make_console
) -> None:
    proxy = SwitchableProxy(("127.0.0.1", own_postgres.port))
    flaky = f"postgresql://postgres@127.0.0.1:{proxy.port}/postgres"
    config = databases_config(uid, {"own": flaky}, console='statement_timeout = "30s"')
    job = f"own_{uid}"
    Ledger(config.databases["own"]).create_schema()
    blocker = psycopg.connect(own_postgres.url)  # direct: not behind the proxy
    holder = psycopg.connect(own_postgres.url, autocommit=True)
    holder.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
    console = make_console(config)
    app = LockConsoleApp(console, refresh=0.5)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: holder_pids(app, job), DEADLINE, "the holder")
            # every ledger read now waits on this lock: a statement in flight
            blocker.execute("lock table lockconsole_runs in access exclusive mode")

            def console_waits() -> bool:
                row = blocker.execute(
                    "select count(*) from pg_stat_activity where wait_event_type = 'Lock' "
                    "and application_name = 'lockconsole:console-ledger'"
                ).fetchone()
                return bool(row and row[0])

            await until(pilot, console_waits, DEADLINE, "the console's read to block")
            await pilot.press("2")
            await until(pilot, lambda: app.focused is app.query_one(HoldersView), DEADLINE, "key 2")
            proxy.cut()
            await until(pilot, lambda: "own" in app.errors, DEADLINE, "the cut to show")
            assert app.query_one("#banner", Static).has_class("-shown")
            assert holder_pids(app, job), "the last good data is kept"
            blocker.rollback()
            proxy.restore()
            await until(pilot, lambda: not app.errors, DEADLINE, "recovery")
            assert holder_pids(app, job)
            await pilot.press("p")  # no new refresh: the read cut in flight must have ended
            await until(
                pilot,
                lambda: console.connections.calls.running() == 0,
                DEADLINE,
                "no read in flight",
            )
            assert app.paused and not app.errors
    finally:
        blocker.close()
        holder.close()
        proxy.close()
