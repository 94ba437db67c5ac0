"""Console: UI-thread time of a refresh at 10,000 holder rows, and time to first frame.

The app (`LockConsoleApp`) runs headless (`App.run_test`, 160x50) over the SampleConsole with
`many_holders(10_000)`. A refresh is what the UI thread does with a `SnapshotLoaded` message:
the bench lays out the rows off the UI thread, as the refresh worker does, then takes the UI
thread's CPU time (time.thread_time) from posting the message until the app is idle again
with the screen repainted (the wall time, in the note, adds the wait for the next screen
update tick), with no change and
with 1% churn (100 holders replaced by new ones each time). The raw side is a naive stock
`DataTable` app reloading the same 10,000 rows (clear + add_rows). Time to first frame runs
from creating the app until it is ready with its first screen; the note adds the time until
the 10,000 holders are on screen. Python and Textual are already imported (a cold
`lockconsole console` also pays their import time), and nothing is written to a terminal.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from typing import Any

from .common import Row, main, median, progress

HOLDERS = 10_000
CHURN = HOLDERS // 100
ROUNDS = 10
NAIVE_ROUNDS = 3
SIZE = (160, 50)
NO_CHANGE_LIMIT = 0.020
CHURN_LIMIT = 0.050
FIRST_FRAME_LIMIT = 1.0
NAIVE_COLUMNS = ("job", "key", "pid", "application", "state", "since")


def _naive_rows(holders: list[Any]) -> list[tuple[str, ...]]:
    return [
        (
            h.job or "-",
            h.key,
            str(h.pid),
            h.application_name or "",
            h.state or "",
            str(h.state_since or ""),
        )
        for h in holders
    ]


def _churned(holders: list[Any], round_no: int) -> list[Any]:
    """The holders with CHURN of them replaced by new keys (a different slice each round)."""
    start = (round_no * CHURN) % len(holders)
    out = list(holders)
    for i in range(start, start + CHURN):
        out[i] = replace(out[i], key=str(900_000_000 + round_no * CHURN + i))
    return out


async def _console(holders: list[Any]) -> dict[str, Any]:
    from lockconsole.tui.app import LockConsoleApp
    from lockconsole.tui.messages import SnapshotLoaded
    from lockconsole.tui.widgets.holders.view import HoldersView
    from tools.sample_console import SampleConsole

    facade = SampleConsole(holders=holders)
    started = time.perf_counter()
    app = LockConsoleApp(facade, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        first_frame = time.perf_counter() - started
        await app.workers.wait_for_complete()
        await pilot.pause()
        first_data = time.perf_counter() - started
        view = app.query_one(HoldersView)
        shown = view.model.total

        async def refresh(holder_list: list[Any]) -> tuple[float, int]:
            previous = app.snapshot
            fresh = replace(facade.snapshot(), holders=tuple(holder_list))
            board = app.dashboard  # the worker's part (LockConsoleApp.prepare)
            merged, rows = app.prepare(
                fresh, previous, board.pane_view(), board.older_runs(), board.panes
            )
            painted = view.painted
            t0, w0 = time.thread_time(), time.perf_counter()
            app.post_message(SnapshotLoaded(merged, rows, 0.0))
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            busy, wall = time.thread_time() - t0, time.perf_counter() - w0
            return busy, wall, view.painted - painted

        same = [await refresh(holders) for _ in range(ROUNDS)]
        churn = [await refresh(_churned(holders, r)) for r in range(ROUNDS)]
    return {
        "first_frame": first_frame,
        "first_data": first_data,
        "shown": shown,
        "same": median(r[0] for r in same),
        "churn": median(r[0] for r in churn),
        "same_wall": median(r[1] for r in same),
        "churn_wall": median(r[1] for r in churn),
        "painted": median(r[2] for r in same + churn),
    }


async def _naive(holders: list[Any]) -> dict[str, Any]:
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    rows = _naive_rows(holders)

    class NaiveApp(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable(id="holders")

        def on_mount(self) -> None:
            table = self.query_one(DataTable)
            table.add_columns(*NAIVE_COLUMNS)
            table.add_rows(rows)

    started = time.perf_counter()
    app = NaiveApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        first_frame = time.perf_counter() - started
        table = app.query_one(DataTable)

        async def reload(new_rows: list[tuple[str, ...]]) -> float:
            t0 = time.thread_time()
            table.clear()
            table.add_rows(new_rows)
            await pilot.pause()
            return time.thread_time() - t0

        same = [await reload(rows) for _ in range(NAIVE_ROUNDS)]
        churn = [await reload(_naive_rows(_churned(holders, r))) for r in range(NAIVE_ROUNDS)]
    return {"first_frame": first_frame, "same": median(same), "churn": median(churn)}


def run() -> list[Row]:
    from tools.sample import many_holders

    holders = many_holders(HOLDERS)
    progress(f"console: naive DataTable, {NAIVE_ROUNDS} reloads of {HOLDERS:,} rows")
    naive = asyncio.run(_naive(holders))
    progress(f"console: LockConsoleApp, {ROUNDS} refreshes each with no change and 1% churn")
    got = asyncio.run(_console(holders))
    painted = (
        f"{got['painted']:.0f} lines repainted per refresh; wall {got['same_wall'] * 1e3:.1f}"
        " ms incl. waiting for the next screen update; raw = stock DataTable reload"
    )
    return [
        Row(
            "console: refresh, no change (10k holders)",
            got["same"],
            naive["same"],
            "s",
            limit=NO_CHANGE_LIMIT,
            note=painted,
        ),
        Row(
            "console: refresh, 1% churn (10k holders)",
            got["churn"],
            naive["churn"],
            "s",
            limit=CHURN_LIMIT,
            note=f"{CHURN} holders replaced per refresh; wall {got['churn_wall'] * 1e3:.1f} ms",
        ),
        Row(
            "console: time to first frame",
            got["first_frame"],
            naive["first_frame"],
            "s",
            limit=FIRST_FRAME_LIMIT,
            note=f"{got['shown']:,} holders on screen after {got['first_data']:.2f} s; raw = "
            "a DataTable app loading the rows on mount",
        ),
    ]


if __name__ == "__main__":
    main(run)
