"""FOR means held for: a pool's keep-alive query never makes a stuck holder look fresh.

Driven by Pilot against real PostgreSQL and MariaDB. A session of the test's own takes a job's
lock and then runs `select 1` every second (a pool's keep-alive), so its `state_change` /
`TIME` resets every second: the holders pane's FOR keeps growing from when the console first
saw the lock (painted "≥…"), describe says that is a lower bound, and the stale rule marks the
holder stale though the session is never idle for long. On MariaDB an idle (`Sleep`) holder
of a job's lock is stale as on PostgreSQL, and a server that cannot show foreign GET_LOCK
holders says so on screen.

Thread workers are not awaited: each test polls with `pilot.pause` up to a deadline.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from textual.widgets import RichLog

from lockconsole.config.loader import Config, parse_config
from lockconsole.console.facade import Console
from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.facts import held_since_text
from lockconsole.tui.widgets.holders.rows import HolderRow
from lockconsole.tui.widgets.holders.view import HoldersView

from tests.support.helpers import DEADLINE, mysql_connect, sync, until

SIZE = (140, 36)
IDLE = '[console]\nidle_threshold = "2s"\n'


class KeepAlive:
    """A session that holds a lock and runs `select 1` every second until stopped."""

    def __init__(self, connect: Callable[[], Any], take: str, args: tuple[Any, ...]) -> None:
        self.conn = connect()
        with self.conn.cursor() as cur:
            cur.execute(take, args)
        self.pings = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._ping, daemon=True)
        self.thread.start()

    def _ping(self) -> None:
        while not self.stop.wait(1.0):  # the pool's keep-alive period
            with self.conn.cursor() as cur:
                cur.execute("select 1")
                cur.fetchall()
            self.pings += 1

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.conn.close()


def pg_config(url: str, uid: str) -> Config:
    text = f'{IDLE}[databases.main]\nurl = "{url}"\n'
    text += f'[jobs.held_{uid}]\ndatabase = "main"\nstrategy = "pg-session"\n'
    return parse_config(text, "test.toml", {})


def row_of(app: LockConsoleApp, job: str) -> tuple[int, HolderRow] | None:
    for i, row in enumerate(app.query_one(HoldersView).model.rows):
        h = row.holder
        if h is not None and h.job == job and h.granted:
            return i, row
    return None


def painted_for(app: LockConsoleApp, job: str) -> str:
    """The FOR cell as painted on screen for the job's holder ('' while not shown)."""
    found = row_of(app, job)
    if found is None:
        return ""
    view = app.query_one(HoldersView)
    line, _ = view._line(found[0] + 1)  # line 0 is the headings; the list is not scrolled
    span = view.columns.span("FOR")
    assert span is not None
    return line[span[0] : span[1]].strip()


def holder(app: LockConsoleApp, job: str) -> Holder | None:
    found = row_of(app, job)
    return found[1].holder if found else None


@pytest.fixture
def keepalives() -> Iterator[list[KeepAlive]]:
    made: list[KeepAlive] = []
    yield made
    for k in made:
        k.close()


@sync
async def test_a_keep_alive_query_resets_neither_for_nor_the_stale_timer(
    own_database: str, uid: str, keepalives: list[KeepAlive]
) -> None:
    config = pg_config(own_database, uid)
    job = f"held_{uid}"
    session = KeepAlive(
        lambda: psycopg.connect(own_database, autocommit=True),
        "select pg_advisory_lock(%s)",
        (config.job(job).key.value,),
    )
    keepalives.append(session)
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            first = await until(pilot, lambda: holder(app, job), what="the holder on screen")
            assert first.held_from == "at_least" and first.held_since is not None
            since = first.held_since
            resets: set[datetime] = set()
            fors: list[str] = []

            def seen_resets() -> bool:
                h = holder(app, job)
                if h is not None and h.state_since is not None:
                    resets.add(h.state_since)
                    assert h.held_since == since, "a keep-alive moved the time held"
                    fors.append(painted_for(app, job))
                return len(resets) >= 4

            # the console saw the keep-alive reset the session's state_change three times
            await until(pilot, seen_resets, DEADLINE, "three keep-alives between refreshes")
            assert session.pings >= 3
            assert fors and all(f.startswith("≥") for f in fors), fors
            h = holder(app, job)
            assert h is not None
            now = datetime.now(UTC)
            assert now - since > timedelta(seconds=3)  # FOR grew across the keep-alives
            assert h.state_since is not None and now - h.state_since < timedelta(seconds=3)
            stale = await until(
                pilot,
                lambda: (x := holder(app, job)) is not None and x.stale,
                what="the holder stale by the rule",
            )
            assert "holding the lock at least" in stale and "no running run" in stale, stale
            h = holder(app, job)
            assert h is not None
            text = held_since_text(h)
            assert text is not None and text.startswith("at least since"), text
            # a lower bound, and why: the first sighting, or the idle session's last statement
            assert "first saw it" in text or "last statement ended" in text, text
            assert "its session's start" in text, text


def foreign_holders_visible(url: str) -> bool:
    """Whether this server shows every GET_LOCK holder (performance_schema or the plugin)."""
    conn = mysql_connect(url)
    try:
        with conn.cursor() as cur:
            cur.execute("select @@performance_schema")
            if cur.fetchone()[0]:
                return True
            cur.execute(
                "select count(*) from information_schema.plugins "
                "where plugin_name = 'METADATA_LOCK_INFO' and plugin_status = 'ACTIVE'"
            )
            return bool(cur.fetchone()[0])
    finally:
        conn.close()


@sync
async def test_mariadb_an_idle_holder_is_stale_and_hidden_holders_are_said(
    mysql_url: str, uid: str, keepalives: list[KeepAlive]
) -> None:
    text = f'{IDLE}[databases.my]\nurl = "{mysql_url}"\n'
    text += f'[jobs.my_{uid}]\ndatabase = "my"\nstrategy = "mysql"\n'
    config = parse_config(text, "test.toml", {})
    job = f"my_{uid}"
    session = KeepAlive(
        lambda: mysql_connect(mysql_url), "select get_lock(%s, 0)", (str(config.job(job).key),)
    )
    keepalives.append(session)
    visible = foreign_holders_visible(mysql_url)
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            first = await until(pilot, lambda: holder(app, job), what="the holder on screen")
            assert first.state and first.state.startswith("Sleep"), first.state
            assert first.held_from in ("at_least", "database")
            stale = await until(
                pilot,
                lambda: (x := holder(app, job)) is not None and x.stale,
                what="the idle MariaDB holder stale by the rule",
            )
            assert stale.startswith("Sleep") and "no running run in the ledger" in stale, stale
            assert session.pings >= 1  # its Sleep time was reset on the way
            view = app.query_one(HoldersView)
            subtitle = str(view.border_subtitle)
            await pilot.press("o")  # the log, with each note in full

            def log() -> str:
                """The log's text without whitespace (it wraps long lines)."""
                text = "".join(line.text for line in app.query_one("#log", RichLog).lines)
                return "".join(text.split())

            notes = app.snapshot.notes
            if not visible:  # the server hides other sessions' GET_LOCK names
                assert any("only configured job names are checked" in n for _, n in notes), notes
            if notes:  # whatever a database cannot show, the console says so
                assert "ⓘ" in subtitle and "my:" in subtitle, subtitle
                for database, note in notes:
                    said = "".join(f"note: {database}: {note}".split())
                    await until(pilot, lambda: said in log(), what=note)  # noqa: B023
            else:
                assert "ⓘ" not in subtitle, subtitle
