"""Sorting every dashboard pane by a chosen column, driven by Pilot on the sample data set:

- `<` / `>` choose a column (its heading in reverse video), `S` sorts by it, again reversed,
  a third time the natural order; the pane's title says the sort ("sorted by PID ↑");
- the cursor stays on the same row after a sort, and a refresh keeps the sort;
- in the holders pane the stale holders stay first in their group whatever the sort, and the
  age (FOR) sorts the longest held first on its first press;
- the sort keys are in the help screen and the palette finds them by their words.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

from rich.text import Text

from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync, until

SIZE = (120, 40)


def app_for(console: Any | None = None) -> LockConsoleApp:
    return LockConsoleApp(console or SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600)


def _holder(pid: int, minutes: int, *, granted: bool = True, stale: str | None = None) -> Holder:
    since = FROZEN_NOW - timedelta(minutes=minutes)
    return Holder(
        database="billing",
        kind="advisory",
        key="4242",
        key_kind="int64",
        granted=granted,
        source="pg_locks",
        job="nightly_billing",
        pid=pid,
        held_since=since if granted else None,
        waiting_since=None if granted else since,
        stale=stale,
    )


def crowded_console() -> SampleConsole:
    """One job's group of five: pids out of order, one waiter, one stale holder."""
    console = SampleConsole()
    holders = (
        _holder(300, 5),
        _holder(100, 40),
        _holder(500, 90, stale="idle in transaction for 1h30m"),
        _holder(200, 1, granted=False),
        _holder(400, 20),
    )
    console.set_snapshot(replace(console.snapshot(), holders=holders))
    return console


def pids(app: LockConsoleApp) -> list[int]:
    return [
        r.holder.pid for r in app.query_one(HoldersView).model.rows if r.holder and r.holder.pid
    ]


def title(app: LockConsoleApp, pane: str) -> str:
    return str(app.query_one(f"#{pane}").border_title)


def cell_text(table: PaneTable, column: int) -> list[str]:
    out = []
    for key in table.row_keys:
        cell = table.get_row(key)[column]
        out.append((cell.plain if isinstance(cell, Text) else str(cell)).lower())
    return out


@sync
async def test_holders_sort_by_the_chosen_column_both_ways_stale_first() -> None:
    app = app_for(crowded_console())
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        view = app.query_one(HoldersView)
        assert pids(app) == [500, 100, 300, 400, 200], "natural: stale first, waiters last"
        await pilot.press("2")
        view._move(
            next(i for i, r in enumerate(view.model.rows) if r.holder and r.holder.pid == 300)
        )
        await pilot.press("greater_than_sign", "greater_than_sign", "greater_than_sign")
        await until(pilot, lambda: view.chosen == "PID", what="PID chosen")
        assert "sorted by" not in title(app, "holders"), "choosing a column does not sort"
        reversed_ = [s.text for s in view.render_line(0) if s.style and s.style.reverse]
        assert [t.strip() for t in reversed_] == ["PID"], "the chosen heading in reverse video"

        await pilot.press("S")
        await until(pilot, lambda: "sorted by PID ↑" in title(app, "holders"), what="PID ↑")
        assert pids(app) == [500, 100, 200, 300, 400], "the stale holder first, then by pid"
        assert "PID ▲" in view.columns.header
        assert view.selected_holder is not None and view.selected_holder.pid == 300

        await pilot.press("S")
        await until(pilot, lambda: "sorted by PID ↓" in title(app, "holders"), what="PID ↓")
        assert pids(app) == [500, 400, 300, 200, 100], "reversed: the stale holder still first"
        assert view.selected_holder is not None and view.selected_holder.pid == 300

        app.refresh_now()
        await settle(app, pilot)
        assert pids(app) == [500, 400, 300, 200, 100], "a refresh keeps the sort"
        assert "sorted by PID ↓" in title(app, "holders")

        await pilot.press("S")
        await until(pilot, lambda: "sorted by" not in title(app, "holders"), what="natural")
        assert pids(app) == [500, 100, 300, 400, 200]

        await pilot.press("greater_than_sign", "S")  # FOR: the longest held first
        await until(pilot, lambda: "sorted by FOR ↓" in title(app, "holders"), what="FOR ↓")
        assert pids(app) == [500, 100, 400, 300, 200]
        await pilot.press("S")
        await until(pilot, lambda: "sorted by FOR ↑" in title(app, "holders"), what="FOR ↑")
        assert pids(app) == [500, 200, 300, 400, 100]


@sync
async def test_jobs_sort_by_the_chosen_column_both_ways() -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        await pilot.press("1", "down")
        picked = jobs.selected_key
        natural = cell_text(jobs, 0)
        await pilot.press("greater_than_sign")  # the first press: the first column, JOB
        await until(pilot, lambda: jobs.chosen == 0, what="JOB chosen")
        assert jobs.label(0).style == "reverse"

        await pilot.press("S")
        await until(pilot, lambda: "sorted by JOB ↑" in title(app, "jobs"), what="JOB ↑")
        assert cell_text(jobs, 0) == sorted(natural) != natural
        assert jobs.selected_key == picked
        assert jobs.label(0).plain == "JOB ▲"

        await pilot.press("S")
        await until(pilot, lambda: "sorted by JOB ↓" in title(app, "jobs"), what="JOB ↓")
        assert cell_text(jobs, 0) == sorted(natural, reverse=True)
        assert jobs.selected_key == picked

        app.refresh_now()
        await settle(app, pilot)
        assert cell_text(jobs, 0) == sorted(natural, reverse=True), "a refresh keeps the sort"

        await pilot.press("S")
        await until(pilot, lambda: title(app, "jobs") == "1 Jobs", what="natural order")
        assert cell_text(jobs, 0) == natural


@sync
async def test_history_sort_by_the_chosen_column_both_ways() -> None:
    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        history = app.query_one("#history", PaneTable)
        await pilot.press("3", "down", "down", "down")
        picked = history.selected_key
        # from nothing chosen `<` picks the last column; then right, wrapping, to SLOT STATUS
        await pilot.press("less_than_sign", *["greater_than_sign"] * 3)
        column = history.names.index("SLOT STATUS")
        await until(pilot, lambda: history.chosen == column, what="SLOT STATUS chosen")

        await pilot.press("S")
        await until(pilot, lambda: "sorted by SLOT STATUS ↑" in title(app, "history"))
        states = cell_text(history, column)
        assert states == sorted(states) and len(set(states)) > 1, states
        assert history.selected_key == picked

        await pilot.press("S")
        await until(pilot, lambda: "sorted by SLOT STATUS ↓" in title(app, "history"))
        assert cell_text(history, column) == sorted(states, reverse=True)
        assert history.selected_key == picked

        app.refresh_now()
        await settle(app, pilot)
        assert cell_text(history, column) == sorted(states, reverse=True)
        assert "sorted by SLOT STATUS ↓" in title(app, "history")


@sync
async def test_the_sort_keys_are_in_the_help_and_the_palette() -> None:
    from lockconsole.tui.palette import ActionsProvider
    from lockconsole.tui.screens.help import help_rows

    app = app_for()
    async with app.run_test(size=SIZE) as pilot:
        await first_data(app, pilot)
        rows = dict(help_rows(app, read_only=False))
        assert "chosen with < >" in rows["S"] and "next column" in rows[">"], rows
        provider = ActionsProvider(app.screen)
        await provider.startup()
        found = [str(hit.help) async for hit in provider.search("descending")]
        assert "sort" in found, found
        found = [str(hit.help) async for hit in provider.search("column")]
        assert {"sort", "sort_next", "sort_previous"} <= set(found), found
