"""The dashboard driven by Pilot against real PostgreSQL and MariaDB (no mocks of databases).

Holders are taken by plain sessions (psycopg, pymysql), released through the modal, a
command job is triggered with its output in the log, --read-only refuses, and a database
that goes away mid-session (a loopback proxy cut, not the shared server) shows the banner
and recovers on its own.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from textual.widgets import Input, RichLog, Static

from lockconsole.config.loader import Config, parse_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import ReadOnlyError
from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.palette import ActionsProvider
from lockconsole.tui.screens.confirm import ConfirmModal, ReleaseModal
from lockconsole.tui.screens.fleet import TriggerModal
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import mysql_connect, settle, sync, unavailable
from tests.support.helpers import wait_for as eventually
from tests.support.tcp_proxy import SwitchableProxy

SIZE = (100, 30)


def pg_and_mysql_config(
    uid: str, pg_url: str | None = None, mysql_url: str | None = None
) -> Config:
    text = ""
    if pg_url:
        text += f"""
[databases.pg]
url = "{pg_url}"
[jobs.pg_{uid}]
database = "pg"
strategy = "pg-session"
[jobs.cmd_{uid}]
database = "pg"
strategy = "pg-session"
command = ["sh", "-c", "echo hello-from-job; echo second-line"]
"""
    if mysql_url:
        text += f"""
[databases.my]
url = "{mysql_url}"
[jobs.my_{uid}]
database = "my"
strategy = "mysql"
"""
    return parse_config(text, "test.toml", {})


async def refresh_until(
    app: LockConsoleApp, pilot: Any, check: Callable[[], Any], timeout: float = 30.0
) -> Any:
    """Refresh (as the `r` key does) until `check()` is true; Pilot does not wait for threads."""
    deadline = time.monotonic() + timeout
    while True:
        app.refresh_now()
        await settle(app, pilot)
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out; errors={app.errors}")
        await asyncio.sleep(0.2)


def shown_holder(app: LockConsoleApp, job: str, pid: int | None = None) -> Holder | None:
    for row in app.query_one(HoldersView).model.rows:
        h = row.holder
        if h is not None and h.job == job and h.granted and (pid is None or h.pid == pid):
            return h
    return None


def select_holder(app: LockConsoleApp, holder: Holder) -> None:
    view = app.query_one(HoldersView)
    index = next(i for i, r in enumerate(view.model.rows) if r.holder == holder)
    view.focus()
    view._move(index)


def log_text(app: LockConsoleApp) -> str:
    return "\n".join(line.text for line in app.query_one("#log", RichLog).lines)


def select_job(app: LockConsoleApp, job: str) -> None:
    table = app.query_one("#jobs", PaneTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(job))


def pg_session_alive(pg_conn: Any, pid: int) -> bool:
    row = pg_conn.execute("select count(*) from pg_stat_activity where pid = %s", (pid,)).fetchone()
    return bool(row[0])


async def release_through_modal(app: LockConsoleApp, pilot: Any, holder: Holder) -> None:
    select_holder(app, holder)
    await pilot.press("x")
    await pilot.pause()
    assert isinstance(app.screen, ReleaseModal)
    await pilot.press(*(holder.job or holder.key))
    await pilot.press("enter")
    await settle(app, pilot)


@sync
async def test_pg_holder_appears_and_release_ends_its_session(
    pg_url, pg_conn, uid, make_console
) -> None:
    config = pg_and_mysql_config(uid, pg_url=pg_url)
    job = f"pg_{uid}"
    holder_conn = psycopg.connect(pg_url, autocommit=True)
    try:
        pid = holder_conn.execute("select pg_backend_pid()").fetchone()[0]
        holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        app = LockConsoleApp(make_console(config))
        async with app.run_test(size=SIZE) as pilot:
            holder = await refresh_until(app, pilot, lambda: shown_holder(app, job, pid))
            assert holder.pid == pid and holder.database == "pg"
            await release_through_modal(app, pilot, holder)
            assert "release: released" in log_text(app), log_text(app)
            assert eventually(lambda: not pg_session_alive(pg_conn, pid)), (
                "the holder's session is gone"
            )
            await refresh_until(app, pilot, lambda: shown_holder(app, job, pid) is None)
    finally:
        holder_conn.close()


def _mysql_alive(mysql_conn: Any, conn_id: int) -> bool:
    with mysql_conn.cursor() as cur:
        cur.execute("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = %s", (conn_id,))
        return bool(cur.fetchone()[0])


@sync
async def test_mariadb_holder_appears_and_release_kills_it(
    mysql_url, mysql_conn, uid, make_console
) -> None:
    config = pg_and_mysql_config(uid, mysql_url=mysql_url)
    job = f"my_{uid}"
    holder_conn = mysql_connect(mysql_url)
    try:
        with holder_conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            conn_id = cur.fetchone()[0]
            cur.execute("SELECT GET_LOCK(%s, 0)", (str(config.job(job).key),))
            assert cur.fetchone()[0] == 1
        app = LockConsoleApp(make_console(config))
        async with app.run_test(size=SIZE) as pilot:
            holder = await refresh_until(app, pilot, lambda: shown_holder(app, job, conn_id))
            await release_through_modal(app, pilot, holder)
            assert "release: released" in log_text(app), log_text(app)
            assert eventually(lambda: not _mysql_alive(mysql_conn, conn_id)), (
                "the holder's session is gone"
            )
    finally:
        try:
            holder_conn.close()
        except Exception:
            pass


@sync
async def test_trigger_streams_the_command_output_into_the_log(pg_url, uid, make_console) -> None:
    config = pg_and_mysql_config(uid, pg_url=pg_url)
    job = f"cmd_{uid}"
    app = LockConsoleApp(make_console(config, instance=f"ops-{uid}"))
    async with app.run_test(size=SIZE) as pilot:
        await refresh_until(app, pilot, lambda: app.snapshot is not None)
        select_job(app, job)
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, TriggerModal)
        await pilot.press("h")  # here, in the console's process
        await settle(app, pilot)
        text = log_text(app)
        assert "hello-from-job" in text and "second-line" in text, text
        assert f"trigger {job}: succeeded" in text, text

        def last_run() -> Any:
            return next((s.last_run for s in app.snapshot.jobs if s.job.name == job), None)

        run = await refresh_until(app, pilot, last_run)
        assert run.trigger == "manual" and run.outcome == "succeeded"


@sync
async def test_trigger_while_another_session_holds_the_lock_says_who(
    pg_url, uid, make_console
) -> None:
    config = pg_and_mysql_config(uid, pg_url=pg_url)
    job = f"cmd_{uid}"
    holder_conn = psycopg.connect(pg_url, autocommit=True, application_name=f"other-{uid}")
    try:
        pid = holder_conn.execute("select pg_backend_pid()").fetchone()[0]
        holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        app = LockConsoleApp(make_console(config))
        async with app.run_test(size=SIZE) as pilot:
            await refresh_until(app, pilot, lambda: shown_holder(app, job, pid))
            select_job(app, job)
            await pilot.press("t", "h")
            await settle(app, pilot)
            text = log_text(app)
            assert f"trigger {job}: skipped" in text and str(pid) in text, text
            assert "hello-from-job" not in text
    finally:
        holder_conn.close()


@sync
async def test_read_only_has_no_release_or_trigger(pg_url, pg_conn, uid, make_console) -> None:
    config = pg_and_mysql_config(uid, pg_url=pg_url)
    job = f"pg_{uid}"
    holder_conn = psycopg.connect(pg_url, autocommit=True)
    try:
        pid = holder_conn.execute("select pg_backend_pid()").fetchone()[0]
        holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        console = make_console(config, read_only=True)
        app = LockConsoleApp(console, read_only=True)
        async with app.run_test(size=SIZE) as pilot:
            holder = await refresh_until(app, pilot, lambda: shown_holder(app, job, pid))
            shown = {b.binding.action for b in app.active_bindings.values() if b.binding.show}
            assert "duplicates" in shown and "release" not in shown and "trigger" not in shown
            provider = ActionsProvider(app.screen)
            offered = [hit.text async for hit in provider.discover()]
            assert "Filter" in offered and "Release" not in offered and "Trigger" not in offered
            assert "READ-ONLY" in str(app.query_one("#status", Static).render())
            select_holder(app, holder)
            await pilot.press("x", "t")
            await pilot.pause()
            await app.run_action("release", app.dashboard)
            app.dashboard.action_trigger()
            app.dashboard.action_release()
            await settle(app, pilot)
            assert not isinstance(app.screen, ReleaseModal | ConfirmModal | TriggerModal)
            said = [n.message for n in app._notifications]
            assert any("force-release refused" in n and "--read-only" in n for n in said), said
            assert any("trigger refused" in n and "--read-only" in n for n in said), said
            assert not any(w.group in ("release", "trigger") for w in app.workers)
            with pytest.raises(ReadOnlyError):
                console.release(holder)
            assert pg_session_alive(pg_conn, pid)
    finally:
        holder_conn.close()


@pytest.fixture
def pg_proxy(pg_url: str) -> Iterator[tuple[SwitchableProxy, str]]:
    u = parse_url(pg_url)
    if not u.host or u.host.startswith("/"):
        unavailable("PostgreSQL is reached over a socket here; the proxy needs TCP")
    proxy = SwitchableProxy((u.host, u.port or 5432))
    auth = u.user + (f":{u.password}" if u.password else "") if u.user else ""
    yield proxy, f"postgresql://{auth}@127.0.0.1:{proxy.port}/{u.database}"
    proxy.close()


@sync
async def test_a_database_that_goes_away_shows_the_banner_and_recovers(
    pg_url, pg_proxy, uid, make_console
) -> None:
    proxy, flaky_url = pg_proxy
    config = pg_and_mysql_config(uid, pg_url=flaky_url)
    job = f"pg_{uid}"
    holder_conn = psycopg.connect(pg_url, autocommit=True)  # direct: it outlives the cut
    try:
        pid = holder_conn.execute("select pg_backend_pid()").fetchone()[0]
        holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        app = LockConsoleApp(make_console(config), refresh=0.5)
        async with app.run_test(size=SIZE) as pilot:
            await refresh_until(app, pilot, lambda: shown_holder(app, job, pid))
            banner = app.query_one("#banner", Static)
            assert not banner.has_class("-shown")
            proxy.cut()
            await refresh_until(app, pilot, lambda: "pg" in app.errors)
            assert banner.has_class("-shown")
            text = str(banner.render())
            assert "pg" in text and "last good data" in text, text
            assert shown_holder(app, job, pid), "the last good data is kept"
            assert app.query_one("#panes").has_class("-degraded")
            assert "down" in str(app.query_one("#status", Static).render())
            proxy.restore()
            await refresh_until(app, pilot, lambda: not app.errors)
            assert not banner.has_class("-shown")
            assert not app.query_one("#panes").has_class("-degraded")
            assert shown_holder(app, job, pid)
    finally:
        holder_conn.close()


@sync
async def test_filter_narrows_holders_and_history(pg_url, uid, make_console) -> None:
    config = pg_and_mysql_config(uid, pg_url=pg_url)
    job = f"pg_{uid}"
    holder_conn = psycopg.connect(pg_url, autocommit=True)
    try:
        holder_conn.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        app = LockConsoleApp(make_console(config))
        async with app.run_test(size=SIZE) as pilot:
            await refresh_until(app, pilot, lambda: shown_holder(app, job))
            await pilot.press("slash")
            assert app.focused is app.query_one("#filter", Input)
            await pilot.press(*uid)
            await pilot.pause()
            rows = [r.holder for r in app.query_one(HoldersView).model.rows if r.holder]
            assert rows and all(uid in (h.job or "") for h in rows)
            await pilot.press("escape")
            assert app.text_filter == ""
    finally:
        holder_conn.close()
