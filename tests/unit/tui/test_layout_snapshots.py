"""Snapshots of the dashboard's layout at 80x24, 100x30 and 200x60, with and without colour:
many holders and an empty run history (it collapses to its title; the holders get the room),
a long stale reason, and cells cut with an ellipsis where a value is wider than its column
can grow (a long application name, a long lock key), in view at every size: stale holders come
first in their group. Plus the describe screen of the stale
holder at 80x24, where the stale reason and the query are in view.

Regenerate with `pytest tests/unit/tui/test_layout_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from textual.strip import Strip

from lockconsole.model.views import Holder
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable
from tools.sample import FROZEN_NOW, many_holders, sample_holders
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync

SIZES = [
    pytest.param((80, 24), id="80x24"),
    pytest.param((100, 30), id="100x30"),
    pytest.param((200, 60), id="200x60"),
]
LONG_STALE = (
    "held 3h12m, longer than the job's max_duration of 2h, and its session has been idle "
    "for 2h58m while the ledger has no running run for this lock (run 4711 on web-4 ended "
    "failed at 23:03 UTC with its pooled connection returned without pg_advisory_unlock)"
)


def odd_holder() -> Holder:
    """An unmapped, stale holder with a long stale reason and a long application name."""
    since = FROZEN_NOW - timedelta(hours=3, minutes=12)
    return Holder(
        database="billing",
        kind="advisory",
        key="7,-2000000001",
        key_kind="int4pair",
        granted=True,
        source="pg_locks",
        job=None,
        mode="ExclusiveLock",
        pid=41234,
        user="reporting",
        application_name="quarterly-revenue-reconciliation-worker-eu-west-1b",
        client_addr="10.20.30.40",
        backend_start=since,
        state="idle in transaction",
        state_since=since,
        query="select pg_advisory_lock(7, -2000000001)",
        held_since=since,
        stale=LONG_STALE,
    )


def crowded_console() -> SampleConsole:
    """The sample's holders, 30 more, the odd one, and an empty history."""
    holders = [*sample_holders(), *many_holders(30, sessions=6), odd_holder()]
    console = SampleConsole(holders=holders)
    console.set_snapshot(replace(console.snapshot(), runs=(), slots=()))
    return console


def crowded(monkeypatch: Any, no_color: bool) -> LockConsoleApp:
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    return LockConsoleApp(crowded_console(), clock=lambda: FROZEN_NOW, refresh=3600)


async def loaded(pilot: Any) -> None:
    await first_data(pilot.app, pilot)
    pilot.app.query_one(HoldersView).focus()
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_crowded_dashboard(
    snap_compare: Any, monkeypatch: Any, size: tuple[int, int], no_color: bool
) -> None:
    assert snap_compare(crowded(monkeypatch, no_color), terminal_size=size, run_before=loaded)


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_describe_the_stale_holder(snap_compare: Any, monkeypatch: Any, no_color: bool) -> None:
    async def run_before(pilot: Any) -> None:
        await loaded(pilot)
        view = pilot.app.query_one(HoldersView)
        view._move(
            next(
                i
                for i, r in enumerate(view.model.rows)
                if r.holder is not None and r.holder.stale == LONG_STALE
            )
        )
        await pilot.press("enter")
        await pilot.pause()

    app = crowded(monkeypatch, no_color)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_a_cut_cell_ends_in_an_ellipsis_and_widths_follow_the_data() -> None:
    """The layout behind the snapshots: the long name is cut with '…' at its column's most."""
    from lockconsole.tui.widgets.holders.rows import MAX_WIDTHS, layout
    from lockconsole.tui.widgets.holders.view import Columns

    rows = layout(crowded_console().snapshot().holders)
    columns = Columns("job", rows.widths, None)
    odd = next(r for r in rows.rows if r.holder is not None and r.holder.pid == 41234)
    line = columns.line(odd.cells)
    assert "quarterly-revenue-reconcili" in line and "…" in line
    assert rows.widths["WHO"] == MAX_WIDTHS["WHO"]
    few = layout(sample_holders()[:1])
    assert few.widths["WHO"] < MAX_WIDTHS["WHO"], "a column is as wide as its data, no wider"


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
@sync
async def test_stale_holders_come_first_so_small_terminals_show_them(
    size: tuple[int, int],
) -> None:
    """What the small snapshots must show, in view without scrolling: the stale holders (first
    in their group), the long stale reason's start, and the long name cut with '…'."""
    app = LockConsoleApp(crowded_console(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=size) as pilot:
        await first_data(app, pilot)
        view = app.query_one(HoldersView)
        assert view.scroll_y == 0
        lines = [view.render_line(y).text for y in range(view.size.height)]
        odd = next((ln for ln in lines if "41234" in ln), None)
        assert odd is not None, lines
        assert odd.startswith("! STALE") and "quarterly-revenue-reconcili" in odd and "…" in odd
        assert "STALE: held 3h12m"[: len(odd) - odd.index("STALE: ")] in odd, odd
        unmapped = [ln for ln in lines if ln.startswith(("! STALE", "? UNMAPPED"))]
        assert unmapped[:2] == [ln for ln in lines if ln.startswith("! STALE")], "stale first"


@sync
async def test_fixed_columns_stay_when_scrolling_right() -> None:
    """Scrolled right, the holders keep STATE, KEY and PID; the jobs their JOB; the history
    its SLOT and JOB."""
    app = LockConsoleApp(crowded_console(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await first_data(app, pilot)
        view = app.query_one(HoldersView)
        view.focus()
        row = next(i for i, r in enumerate(view.model.rows) if r.holder and r.holder.pid == 41234)
        view._move(row)
        await pilot.press(*["right"] * 12)
        await pilot.pause()
        assert view.scroll_x > 0
        line = view.render_line(row - round(view.scroll_y) + 1).text
        assert line.startswith("! STALE"), line
        assert "7,-2000000001" in line and "41234" in line, line
        assert "quarterly" not in line, "the columns behind the fixed ones scrolled"
        jobs = app.query_one("#jobs", PaneTable)
        assert jobs.fixed_columns == 1 and app.query_one("#history", PaneTable).fixed_columns == 2


def luminance(colour: Any) -> float:
    def channel(value: int) -> float:
        v = value / 255
        return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

    r, g, b = colour.get_truecolor()
    return 0.2126 * channel(r) + 0.7152 * channel(g) + 0.0722 * channel(b)


def contrast(a: Any, b: Any) -> float:
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
@sync
async def test_no_color_text_keeps_its_contrast(monkeypatch: Any, no_color: bool) -> None:
    """Every state's text (FAILED, UNMAPPED, STALE, WAIT, DOUBLE RUN, the pane titles) is at
    least 4.5:1 against its background, with colour and without (WCAG AA for text)."""
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    else:
        monkeypatch.delenv("NO_COLOR", raising=False)
    console = SampleConsole(holders=[*sample_holders(), *many_holders(2, 2), odd_holder()])
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(200, 60)) as pilot:
        await first_data(app, pilot)
        app.query_one(HoldersView).focus()
        await pilot.pause()
        update = app.screen._compositor.render_update(full=True)
        seen: set[Any] = set()
        for line in update.strips:
            for segment in Strip.join(line):
                style, text = segment.style, segment.text.strip()
                if not (style and style.color and style.bgcolor and text):
                    continue
                if not any(m in text for m in MARKERS):
                    continue
                seen.update(m for m in MARKERS if m in text)
                ratio = contrast(style.color, style.bgcolor)
                assert ratio >= 4.5, (text, str(style.color), str(style.bgcolor), round(ratio, 2))
        assert seen == set(MARKERS), seen


MARKERS = ("✖ FAILED", "? UNMAPPED", "! STALE", "⧗ WAIT", "✖ DOUBLE RUN", "Lock holders")


@sync
async def test_table_columns_grow_and_shrink_with_the_data_on_refresh() -> None:
    """A cell that grows after the first paint widens its column (no cut 'NEXT' cell), and
    the column shrinks back when the long value is gone."""
    from rich.cells import cell_len

    console = SampleConsole()
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(200, 60)) as pilot:
        await first_data(app, pilot)
        jobs = app.query_one("#jobs", PaneTable)
        before = jobs.widths[3]
        snap = console.snapshot()
        far = FROZEN_NOW + timedelta(days=400, hours=5, minutes=7)
        status = replace(snap.jobs[1], next_fire=far)
        console.set_snapshot(replace(snap, jobs=(snap.jobs[0], status, *snap.jobs[2:])))
        app.refresh_now()
        await settle(app, pilot)
        cell = jobs.get_row(status.job.name)[3]
        grown = jobs.widths[3]
        assert grown >= cell_len(str(cell)) > before, (str(cell), before, grown)
        console.set_snapshot(snap)
        app.refresh_now()
        await settle(app, pilot)
        assert jobs.widths[3] == before
