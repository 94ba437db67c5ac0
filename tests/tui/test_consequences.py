"""Dialogs that say the consequences, driven by Pilot against real PostgreSQL and MariaDB.

Force-release's dialog names the session that gets the lock next (the longest waiting on
that key) and every other lock the same session holds (ending it frees them all), and the
release then does just that. Trigger's dialog warns, before the operator chooses, when the job
holds its lock right now, and when the slot chosen in the history already succeeded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from textual.widgets import Input, Static

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console
from lockconsole.engine.execute import run_target
from lockconsole.engine.runner import begin
from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.confirm import ReleaseModal
from lockconsole.tui.screens.fleet import TriggerModal
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import eventually, mysql_connect, sync, until

SIZE = (160, 40)


def shown_holder(app: LockConsoleApp, job: str | None, key: str | None = None) -> Holder | None:
    for row in app.query_one(HoldersView).model.rows:
        h = row.holder
        if h is not None and h.granted and h.job == job and (key is None or h.key == key):
            return h
    return None


def select_holder(app: LockConsoleApp, holder: Holder) -> None:
    view = app.query_one(HoldersView)
    view.focus()
    view._move(next(i for i, r in enumerate(view.model.rows) if r.holder == holder))


def modal_text(app: LockConsoleApp, widget: str) -> str:
    return str(app.screen.query_one(widget, Static).render())


class Waiter:
    """A session blocked on a lock in a thread of its own (until it gets the lock)."""

    def __init__(self, connect: Callable[[], Any], take: str, args: tuple[Any, ...]) -> None:
        self.conn = connect()
        self.pid = self._pid()
        self.got = threading.Event()
        threading.Thread(target=self._wait, args=(take, args), daemon=True).start()

    def _pid(self) -> int:
        with self.conn.cursor() as cur:
            cur.execute(
                "select pg_backend_pid()" if _is_pg(self.conn) else "select connection_id()"
            )
            return int(cur.fetchone()[0])

    def _wait(self, take: str, args: tuple[Any, ...]) -> None:
        try:
            with self.conn.cursor() as cur:
                cur.execute(take, args)
            self.got.set()
        except Exception:
            pass


def _is_pg(conn: Any) -> bool:
    return isinstance(conn, psycopg.Connection)


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    conns: list[Any] = []
    yield conns
    for conn in conns:
        try:
            conn.close()
        except Exception:
            pass


def waiting_pids(admin: Any, key: int) -> list[int]:
    """The sessions waiting for the int64 advisory lock `key` (pg_locks splits it into
    classid, the high 32 bits, and objid, the low 32 bits, both unsigned)."""
    rows = admin.execute(
        "select pid from pg_locks where locktype = 'advisory' and not granted "
        "and classid = %s and objid = %s and objsubid = 1 "
        "and database = (select oid from pg_database where datname = current_database())",
        ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF),
    ).fetchall()
    return [r[0] for r in rows]


@sync
async def test_release_names_the_next_waiter_and_every_lock_freed_with_it(
    own_database: str, uid: str, closing: list[Any]
) -> None:
    text = f'[databases.main]\nurl = "{own_database}"\n'
    for name in ("held", "other"):
        text += f'[jobs.{name}_{uid}]\ndatabase = "main"\nstrategy = "pg-session"\n'
    config = parse_config(text, "test.toml", {})
    job, other = f"held_{uid}", f"other_{uid}"
    key = int(str(config.job(job).key))  # an int64 key
    admin = psycopg.connect(own_database, autocommit=True)
    holder = psycopg.connect(own_database, autocommit=True)
    closing += [admin, holder]
    # one session holds the job's lock, another job's lock and an app's own key
    holder.execute(
        "select pg_advisory_lock(%s), pg_advisory_lock(%s), pg_advisory_lock(777000111)",
        (key, config.job(other).key.value),
    )
    connect = lambda: psycopg.connect(own_database, autocommit=True)  # noqa: E731
    first = Waiter(connect, "select pg_advisory_lock(%s)", (key,))
    closing.append(first.conn)
    assert eventually(lambda: first.pid in waiting_pids(admin, key)), "queued first"
    second = Waiter(connect, "select pg_advisory_lock(%s)", (key,))
    closing.append(second.conn)
    assert eventually(lambda: second.pid in waiting_pids(admin, key)), "queued second"
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            found = await until(
                pilot,
                lambda: (
                    (h := shown_holder(app, job)) is not None
                    and len([w for w in app.snapshot.holders if not w.granted]) >= 2
                    and h
                ),
                what="the holder and its two waiters",
            )
            select_holder(app, found)
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ReleaseModal), what="the dialog")
            said = modal_text(app, "#consequences")
            assert f"pid {first.pid}" in said and "gets the lock next" in said, said
            assert "1 more wait behind it" in said, said
            assert f"pid {second.pid}" not in said.split("gets the lock next")[0], said
            assert "2 other lock(s), all freed with it" in said and other in said, said
            assert "777000111" in said, said
            app.screen.query_one(Input).value = job
            await pilot.press("enter")
            # what the dialog said comes true: the first waiter has the lock, the rest is free.
            # Waited for while the app runs: the release is a worker the app's loop starts.
            await until(pilot, first.got.is_set, what="the first waiter to get the lock")
            assert not second.got.is_set()
            row = admin.execute(
                "select count(*) from pg_locks where locktype = 'advisory' and objid = 777000111"
                " and database = (select oid from pg_database where datname = current_database())"
            ).fetchone()
            assert row[0] == 0


@sync
async def test_mariadb_release_names_the_other_get_lock_names_of_the_connection(
    mysql_url: str, uid: str, closing: list[Any]
) -> None:
    text = f'[databases.my]\nurl = "{mysql_url}"\n'
    for name in ("held", "other"):
        text += f'[jobs.{name}_{uid}]\ndatabase = "my"\nstrategy = "mysql"\n'
    config = parse_config(text, "test.toml", {})
    job, other = f"held_{uid}", f"other_{uid}"
    holder = mysql_connect(mysql_url)
    closing.append(holder)
    with holder.cursor() as cur:
        cur.execute(
            "select get_lock(%s, 0), get_lock(%s, 0)",
            (str(config.job(job).key), str(config.job(other).key)),
        )
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            found = await until(
                pilot,
                lambda: shown_holder(app, other) and shown_holder(app, job),
                what="both names held",
            )
            select_holder(app, found)
            await pilot.press("x")
            await until(pilot, lambda: isinstance(app.screen, ReleaseModal), what="the dialog")
            said = modal_text(app, "#consequences")
            assert "1 other lock(s), all freed with it" in said and other in said, said


@sync
async def test_trigger_warns_when_the_job_holds_its_lock_and_when_the_slot_succeeded(
    own_database: str, uid: str, closing: list[Any]
) -> None:
    text = f'[databases.main]\nurl = "{own_database}"\n'
    text += f'[jobs.t_{uid}]\ndatabase = "main"\nstrategy = "pg-session"\n'
    text += 'schedule = "0 3 * * *"\ncommand = ["true"]\n'
    config = parse_config(text, "test.toml", {})
    job = config.job(f"t_{uid}")
    slot = (datetime.now(UTC) - timedelta(days=1)).replace(
        hour=3, minute=0, second=0, microsecond=0
    )
    database = config.database_for(job)
    attempt = begin(job, database, config.ledger_for(job), instance="web-1", slot=slot)
    assert attempt.acquired
    ran = run_target(attempt, ["true"], handle_signals=False)
    assert ran.outcome == "succeeded"
    holder = psycopg.connect(own_database, autocommit=True)
    closing.append(holder)
    with Console(config) as console:
        app = LockConsoleApp(console, refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None and app.snapshot.runs)
            # the slot's row in the history: the trigger reruns that slot
            history = app.query_one("#history", PaneTable)
            history.focus()
            await until(
                pilot, lambda: any(r.id == ran.id for r, _ in app.dashboard.runs_of.values())
            )
            row = next(k for k, (r, _) in app.dashboard.runs_of.items() if r.id == ran.id)
            history.move_cursor(row=history.get_row_index(row))
            await pilot.pause()
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, TriggerModal), what="the dialog")
            said = modal_text(app, "#warnings")
            assert "already succeeded on web-1" in said and f"run {ran.id}" in said, said
            assert "holds its lock" not in said, said
            await pilot.press("escape")
            # now a session takes the job's lock: the trigger warns of it too
            holder.execute("select pg_advisory_lock(%s)", (job.key.value,))
            await until(pilot, lambda: shown_holder(app, job.name), what="the holder")
            app.query_one("#jobs", PaneTable).focus()
            await pilot.press("t")
            await until(pilot, lambda: isinstance(app.screen, TriggerModal), what="the dialog")
            said = modal_text(app, "#warnings")
            assert f"{job.name} holds its lock right now" in said, said
            assert "skipped while that lock is held" in said, said
            await pilot.press("escape")
