"""Every console pane, screen and modal on hostile data (tests/support/hostile.py, real servers):
the bytes the driver would write to the terminal hold no control sequence but the console's own
(colours and cursor moves), the data shows as visible escapes, and the holders' key and PID columns
stay where the header puts them whatever the data's width."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from rich.cells import cell_len
from textual.widgets import DataTable, RichLog

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.rows import FIELDS
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import settle
from tests.support.hostile import (
    World,
    cells,
    hostile_world,
    no_nul,
    one_of_each_kind,
    raw_controls,
)

# What Textual itself writes: SGR colours and absolute cursor moves. Anything else is data.
OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\d+;\d+H")


@pytest.fixture(scope="module")
def world(pg_url: str, mysql_url: str, tmp_path_factory: Any) -> Iterator[World]:
    uid = uuid.uuid4().hex[:10]
    with hostile_world(pg_url, mysql_url, uid, tmp_path_factory.mktemp("hostile")) as w:
        yield w


def terminal(app: LockConsoleApp) -> str:
    """Exactly what the driver would write for a full repaint of the current screen."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def assert_inert(app: LockConsoleApp, where: str) -> str:
    out = terminal(app)
    # one line per row: a line more would scroll the real terminal (and the status line off)
    assert out.count("\n") < app.size.height, where
    leftover = OWN_SEQUENCES.sub("", out)
    assert not raw_controls(leftover), (where, raw_controls(leftover))
    return out


async def loaded(app: LockConsoleApp, pilot: Any) -> None:
    for _ in range(300):  # until the holders are in (a generous deadline, not a bound)
        await pilot.pause(0.1)
        if app.snapshot is not None and app.query_one(HoldersView).model.total >= 60:
            break
    await settle(app, pilot)


def select_job(app: LockConsoleApp, job: str) -> None:
    table = app.query_one("#jobs", PaneTable)
    table.focus()
    table.move_cursor(row=table.get_row_index(job))


def run(world: World, script: Any, size: tuple[int, int] = (120, 40)) -> None:
    async def main() -> None:
        console = Console(load_config(str(world.config)))
        try:
            app = LockConsoleApp(console, refresh=3600)
            async with app.run_test(size=size) as pilot:
                await loaded(app, pilot)
                await script(app, pilot)
        finally:
            console.close()

    asyncio.run(main())


# The strings whose describe screen and release modal are opened: one of each kind (the
# strings the console escapes the same way, tests/data/hostile_strings.json), which shows what
# every string of the kind would; the holders pane itself is checked on every holder.
WALKED = one_of_each_kind()


def screen_walk(world: World, holder: Any) -> int | None:
    """The corpus string whose describe screen and release modal are opened on this holder, or
    None: each string of WALKED once, on one of the three kinds of holder in turn (the n-th on
    kind n % 3), so every kind of string and every kind of holder go through both screens."""
    index, kind = None, -1
    if holder.key in world.my_names:
        index, kind = world.my_names.index(holder.key), 2
    elif holder.key in world.lease_names:
        index, kind = world.lease_names.index(holder.key), 1
    elif holder.pid in world.pg_pids:
        index, kind = world.strings.index(world.pg_pids[holder.pid]), 0
    if index is None or index not in WALKED:
        return None
    return index if WALKED.index(index) % 3 == kind else None


def test_dashboard_on_every_holder_and_its_screens_on_every_string(world: World) -> None:
    async def script(app: LockConsoleApp, pilot: Any) -> None:
        out = assert_inert(app, "dashboard")
        assert "\\x1b" in out, "the escapes are shown, visibly"
        view = app.query_one(HoldersView)
        columns = view.columns
        widths = {FIELDS[i]: w for i, w in columns.picks}  # from the data, on every refresh
        offsets, at = {}, 0
        for name in widths:
            offsets[name] = at
            at += widths[name] + 1
        holders = [(i, r) for i, r in enumerate(view.model.rows) if r.holder is not None]
        assert len(holders) >= 3 * 24, "PG sessions, leases and GET_LOCK names are all listed"
        view.focus()
        walked: set[int] = set()
        for index, row in holders:
            h = row.holder
            line = columns.line(row.cells)
            assert cell_len(line) == columns.width, (h.key, line)
            pid = cells(line, offsets["PID"], offsets["PID"] + widths["PID"]).strip()
            assert pid == (str(h.pid) if h.pid is not None else h.kind), (h.key, line)
            key = cells(line, offsets["KEY"], offsets["KEY"] + widths["KEY"]).rstrip()
            assert key and row.cells[2].startswith(key.rstrip("…").rstrip()), (h.key, line)
            view._move(index)
            await pilot.pause()
            assert_inert(app, f"holders at {h.key!r}")
            string = screen_walk(world, h)
            if string is None:
                continue
            walked.add(string)
            await pilot.press("enter")  # the describe screen shows it as data too
            await pilot.pause()
            assert type(app.screen).__name__ == "HolderScreen"
            assert_inert(app, f"describe screen of {h.key!r}")
            await pilot.press("escape")
            await pilot.pause()
            await pilot.press("x")
            await pilot.pause()
            modal = app.screen
            if not h.granted:  # a waiter: nothing to release, said in a notice
                assert type(modal).__name__ == "DashboardScreen"
                continue
            assert type(modal).__name__ == "ReleaseModal"
            assert_inert(app, f"release modal of {h.key!r}")
            dialog = modal.query_one("#dialog").region
            assert dialog.y >= 2, "the header and status line (rows 0, 1) are never covered"
            assert modal.query_one("#buttons").region.bottom <= 40
            await pilot.press("escape")
            await pilot.pause()
            assert type(app.screen).__name__ != "ReleaseModal"
        assert walked == set(WALKED), "a string of every kind went through the screens"

    run(world, script)


def test_screens_log_and_notifications(world: World) -> None:
    async def script(app: LockConsoleApp, pilot: Any) -> None:
        assert "bad" in str(app.query_one("#banner").render()), "the server's error is shown"
        # duplicates screen, then the rows of a hostile group
        select_job(app, world.jobs["dupes"])
        await pilot.press("d")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "DuplicatesScreen"
        groups = app.screen.query_one("#groups", DataTable)
        # the groups of one string of each kind (a group's key is the string, NUL taken out)
        walked = {no_nul(world.strings[i]) for i in WALKED}
        screen: Any = app.screen  # a DuplicatesScreen (asserted above)
        rows = [i for i, g in enumerate(screen.groups) if g.key[0] in walked]
        assert len(rows) == len(WALKED), "a duplicate group of each kind of string"
        for row in rows:
            groups.move_cursor(row=row)
            await pilot.press("enter")
            await settle(app, pilot)
            assert_inert(app, f"duplicates group {row}")
        await pilot.press("escape")
        await pilot.pause()
        # timeline and run detail of the job whose ledger rows are hostile
        select_job(app, world.jobs["ledger"])
        await pilot.press("s")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "TimelineScreen"
        for _ in range(26):
            assert_inert(app, "timeline")
            await pilot.press("down")
            await pilot.pause()
        await pilot.press("escape")
        await pilot.pause()
        history = app.query_one("#history", PaneTable)
        history.focus()
        for row in range(min(history.row_count, 30)):
            history.move_cursor(row=row)
            await pilot.press("i")
            await pilot.pause()
            assert_inert(app, f"run detail {row}")
            await pilot.press("escape")
            await pilot.pause()
        # a job's stdout and stderr in the log, and the notification of its failure
        select_job(app, world.jobs["printer"])
        await pilot.press("t")
        await pilot.pause()
        assert_inert(app, "trigger modal")
        await pilot.press("h")
        await settle(app, pilot)
        await pilot.pause(0.2)
        log = app.query_one("#log", RichLog)
        logged = "\n".join(line.text for line in log.lines)
        assert "\\x1b[2J" in logged and "err: " in logged, "the output is in the log, escaped"
        assert app._notifications, "the trigger's result was notified"
        assert_inert(app, "log and notification")
        await pilot.press("question_mark")
        await pilot.pause()
        assert_inert(app, "help")

    run(world, script)


def pid_of(view: HoldersView, index: int) -> int:
    """The pid of the holder on the view's row `index` (a row with a holder)."""
    holder = view.model.rows[index].holder
    assert holder is not None and holder.pid is not None
    return int(holder.pid)


def test_release_modal_on_a_small_terminal_keeps_the_status_line(world: World) -> None:
    async def script(app: LockConsoleApp, pilot: Any) -> None:
        view = app.query_one(HoldersView)
        view.focus()
        tall = [i for i, r in enumerate(view.model.rows) if r.holder and r.holder.query]
        assert len(tall) >= 20, "the PostgreSQL sessions, with their query text"
        # the world's sessions of one string of each kind (the longest query among them)
        walked = {world.strings[i] for i in WALKED}
        tall = [i for i in tall if world.pg_pids.get(pid_of(view, i)) in walked]
        assert len(tall) == len(WALKED), "a session of each kind of string"
        for index in tall:
            view._move(index)
            await pilot.press("x")
            await pilot.pause()
            modal = app.screen
            assert modal.query_one("#dialog").region.y >= 2, view.model.rows[index].cells
            assert modal.query_one("#buttons").region.bottom <= 24
            assert_inert(app, "release modal at 80x24")
            await pilot.press("escape")
            await pilot.pause()

    run(world, script, size=(80, 24))
