"""The modal and detail screens, driven with Pilot on a minimal host app.

The release and confirm modals, the timeline, run detail and help screens use the fixed
sample data (they hold no database logic); the duplicates screen runs against a real
PostgreSQL with its own invoices_<uid> table (120 tenants charged three times), dropped after.
"""

from __future__ import annotations

import asyncio
import csv
import io
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console as RichConsole
from textual.app import App
from textual.screen import Screen
from textual.widgets import Button, DataTable, Input, Static

from lockconsole.config.loader import parse_config
from lockconsole.model.views import Holder
from lockconsole.tui.screens import (
    DuplicatesScreen,
    HelpScreen,
    RunDetailScreen,
    TimelineScreen,
)
from lockconsole.tui.screens.confirm import ConfirmModal, ReleaseModal
from tools.sample import FROZEN_NOW, sample_snapshot

from tests.support.helpers import settle

TENANTS = 120  # each charged three times in 2026-11: 120 groups, 240 surplus rows


class Host(App[None]):
    """Pushes one screen on mount and records what it dismisses with."""

    def __init__(self, make: Callable[[], Screen[Any]]) -> None:
        super().__init__()
        self.make = make
        self.results: list[Any] = []

    def on_mount(self) -> None:
        self.push_screen(self.make(), self.results.append)


def drive(
    make: Callable[[], Screen[Any]],
    script: Callable[[Any, Host], Any],
    size: tuple[int, int] = (80, 24),
) -> Host:
    """Run the host app headless at `size` and await `script(pilot, app)`."""
    app = Host(make)

    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await pilot.pause()
            await script(pilot, app)

    asyncio.run(main())
    return app


def holder(stale: bool = False, waiter: bool = False) -> Holder:
    holders = sample_snapshot().holders
    if waiter:
        return next(h for h in holders if not h.granted)
    if stale:
        return next(h for h in holders if h.stale)
    return next(h for h in holders if h.job == "nightly_billing" and h.granted)


def text_of(app: App[Any], selector: str) -> str:
    """The plain text a Static shows (a str, Text or a Rich table)."""
    content = app.screen.query_one(selector, Static).content
    out = RichConsole(width=200, file=io.StringIO(), record=True)
    out.print(content)
    return out.export_text()


# --- ReleaseModal -------------------------------------------------------------------------


def test_release_escape_returns_false() -> None:
    async def script(pilot: Any, app: Host) -> None:
        assert isinstance(app.screen, ReleaseModal)
        await pilot.press("escape")

    assert drive(lambda: ReleaseModal(holder()), script).results == [False]


def test_release_stays_disabled_with_a_wrong_text() -> None:
    async def script(pilot: Any, app: Host) -> None:
        await pilot.press(*"nightly_bill")
        assert app.screen.query_one("#release", Button).disabled
        await pilot.press("enter")  # refused: the modal stays
        await pilot.pause()
        assert isinstance(app.screen, ReleaseModal)
        assert app.screen.query_one(Input).has_class("-wrong")
        await pilot.press(*"ing_x")
        assert app.screen.query_one("#release", Button).disabled

    assert drive(lambda: ReleaseModal(holder()), script).results == []


def test_release_confirms_after_typing_the_job_name() -> None:
    async def script(pilot: Any, app: Host) -> None:
        shown = text_of(app, "#title")
        assert "pid 31001" in shown and "billing" in shown
        await pilot.press(*"nightly_billing")
        assert not app.screen.query_one("#release", Button).disabled
        await pilot.press("enter")
        await pilot.pause()

    assert drive(lambda: ReleaseModal(holder()), script).results == [True]


def test_release_button_confirms_an_unmapped_holder_by_its_key() -> None:
    async def script(pilot: Any, app: Host) -> None:
        await pilot.press(*"31337")
        await pilot.click("#release")
        await pilot.pause()

    assert drive(lambda: ReleaseModal(holder(stale=True)), script).results == [True]


def test_release_refuses_a_waiter() -> None:
    async def script(pilot: Any, app: Host) -> None:
        modal = app.screen
        assert not modal.query(Input) and not modal.query("#release")
        assert "cannot be released" in text_of(app, "#title")
        assert "31001" in text_of(app, "#waiter")
        await pilot.press("enter")  # the focused Cancel button
        await pilot.pause()

    assert drive(lambda: ReleaseModal(holder(waiter=True)), script).results == [False]


# --- ConfirmModal -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "expected"), [("y", True), ("enter", True), ("n", False), ("escape", False)]
)
def test_confirm_modal_keys(key: str, expected: bool) -> None:
    async def script(pilot: Any, app: Host) -> None:
        await pilot.press(key)
        await pilot.pause()

    made = drive(lambda: ConfirmModal("Trigger nightly_billing?", "Runs it here."), script)
    assert made.results == [expected]


# --- TimelineScreen, RunDetailScreen, HelpScreen -----------------------------------------


def test_timeline_opens_on_the_newest_slot_and_moves_between_slots() -> None:
    async def script(pilot: Any, app: Host) -> None:
        screen = app.screen
        assert isinstance(screen, TimelineScreen)
        assert screen.selected == 0 and screen.slots[0] == max(screen.slots)
        while screen.status[screen.slots[screen.selected]] != "double_run":
            before = screen.selected
            await pilot.press("down")
            assert screen.selected == before + 1
        assert screen.slots[screen.selected].day == 27
        await pilot.press("right")
        assert screen.selected_run().instance == "web-2"
        await pilot.press("enter")
        await pilot.pause()
        detail = app.screen
        assert isinstance(detail, RunDetailScreen)
        assert detail.run.instance == "web-2" and len(detail.slot_runs) == 3
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        await pilot.press("escape")
        await pilot.pause()

    make = lambda: TimelineScreen(sample_snapshot(), "nightly_billing", now=FROZEN_NOW)  # noqa: E731
    assert drive(make, script).results == [None]


def test_timeline_of_a_job_without_runs() -> None:
    async def script(pilot: Any, app: Host) -> None:
        assert "No runs of nobody" in text_of(app, "#tl-empty")
        await pilot.press("down", "enter", "escape")
        await pilot.pause()

    make = lambda: TimelineScreen(sample_snapshot(), "nobody", now=FROZEN_NOW)  # noqa: E731
    assert drive(make, script).results == [None]


@pytest.mark.parametrize("key", ["escape", "question_mark"])
def test_help_closes(key: str) -> None:
    async def script(pilot: Any, app: Host) -> None:
        assert "release the holder" in text_of(app, "#keys-table")
        await pilot.press(key)
        await pilot.pause()

    made = drive(lambda: HelpScreen([("r", "release the holder"), ("?", "keys")]), script)
    assert made.results == [None]


# --- DuplicatesScreen against a real PostgreSQL ------------------------------------------


@pytest.fixture
def invoices(pg_conn: Any, uid: str) -> Iterator[str]:
    table = f"invoices_{uid}"
    pg_conn.execute(
        f"create table {table} (id serial primary key, tenant_id int, "
        f"period text, amount numeric, run_id int)"
    )
    pg_conn.execute(
        f"insert into {table} (tenant_id, period, amount, run_id) "
        f"select t, '2026-11', 49, r from generate_series(1, {TENANTS}) t, "
        f"generate_series(1, 3) r"
    )
    pg_conn.execute(
        f"insert into {table} (tenant_id, period, amount, run_id) "
        f"select t, '2026-10', 49, 1 from generate_series(1, 50) t"
    )
    yield table
    pg_conn.execute(f"drop table if exists {table}")


def pg_console(pg_url: str, table: str) -> Any:
    from lockconsole.console.facade import Console

    config = parse_config(
        textwrap.dedent(f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.nightly_billing]
        database = "main"
        strategy = "pg-session"
        command = ["true"]
        [jobs.nightly_billing.idempotency]
        table = "{table}"
        key = ["tenant_id", "period"]
        run_column = "run_id"
        """),
        "test.toml",
    )
    return Console(config)


def test_duplicates_screen_on_postgres(
    pg_url: str, invoices: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    console = pg_console(pg_url, invoices)

    async def script(pilot: Any, app: Host) -> None:
        await settle(app, pilot)
        summary = text_of(app, "#dup-summary")
        assert "120 duplicated keys · 240 surplus rows" in summary
        assert "NO unique key on (tenant_id, period)" in summary
        assert "ADD CONSTRAINT" in text_of(app, "#ddl")
        groups = app.screen.query_one("#groups", DataTable)
        assert groups.row_count == 50
        assert [str(c) for c in groups.get_row_at(0)[:3]] == ["1", "2026-11", "3"]
        assert str(groups.get_row_at(0)[3]) == "1, 2, 3"  # the run ids
        await pilot.press("n")
        await settle(app, pilot)
        assert str(groups.get_row_at(0)[0]) == "51"
        assert "page 2 · groups 51–100 of 120" in text_of(app, "#page-line")
        await pilot.press("n")
        await settle(app, pilot)
        dup = app.screen
        assert isinstance(dup, DuplicatesScreen)
        assert groups.row_count == 20 and not dup.has_more
        await pilot.press("p", "p")
        await settle(app, pilot)
        assert str(groups.get_row_at(0)[0]) == "1" and dup.page == 0
        await pilot.press("down", "down", "enter")
        await settle(app, pilot)
        rows = app.screen.query_one("#rows", DataTable)
        assert rows.row_count == 3
        assert {str(rows.get_row_at(i)[1]) for i in range(3)} == {"3"}  # tenant_id of group 3
        assert "3 rows with key (3, 2026-11)" in text_of(app, "#rows-title")
        await pilot.press("e", "enter")
        await settle(app, pilot)
        await pilot.press("escape")
        await pilot.pause()

    try:
        app = drive(lambda: DuplicatesScreen(console, "nightly_billing"), script, (120, 40))
    finally:
        console.close()
    assert app.results == [None]
    with open(tmp_path / "nightly_billing-duplicates.csv", newline="") as f:
        exported = list(csv.reader(f))
    assert exported[0] == ["id", "tenant_id", "period", "amount", "run_id"]
    assert len(exported) == 1 + 3 * TENANTS


def test_duplicates_export_to_a_typed_path(pg_url: str, invoices: str, tmp_path: Path) -> None:
    console = pg_console(pg_url, invoices)
    target = tmp_path / "out.csv"

    async def script(pilot: Any, app: Host) -> None:
        await settle(app, pilot)
        await pilot.press("e")
        app.screen.query_one("#export-path", Input).value = ""
        await pilot.press(*str(target), "enter")
        await settle(app, pilot)
        dup = app.screen
        assert isinstance(dup, DuplicatesScreen)
        assert dup.page == 0  # typing n and p into the path changed no page

    try:
        drive(lambda: DuplicatesScreen(console, "nightly_billing"), script)
    finally:
        console.close()
    assert len(target.read_text().splitlines()) == 1 + 3 * TENANTS


def test_duplicates_screen_shows_a_database_error(pg_url: str, uid: str) -> None:
    console = pg_console(pg_url, f"missing_{uid}")

    async def script(pilot: Any, app: Host) -> None:
        await settle(app, pilot)
        error = app.screen.query_one("#dup-error", Static)
        assert error.has_class("-shown")
        assert f"missing_{uid} does not exist" in text_of(app, "#dup-error")
        assert not app.screen.query_one("#groups", DataTable).loading
        await pilot.press("n", "enter", "escape")
        await pilot.pause()

    try:
        app = drive(lambda: DuplicatesScreen(console, "nightly_billing"), script)
    finally:
        console.close()
    assert app.results == [None]


def test_describe_job_says_when_its_ledger_commits_are_async() -> None:
    """The job's grid names ledger_commit = "async" (an operator reading a lost outcome after a
    crash should see why); a durable job shows no such row."""
    from lockconsole.model.views import JobStatus
    from lockconsole.tui.screens.describe import job_fields

    config = parse_config(
        '[databases.main]\nurl = "postgresql://app@db/app"\n'
        '[jobs.fast]\nledger_commit = "async"\n[jobs.plain]\n'
    )

    def text(name: str) -> str:
        out = RichConsole(width=120, record=True, color_system=None)
        out.print(job_fields(JobStatus(config.job(name), None, None, None)))
        return out.export_text()

    assert "ledger commit" in text("fast") and "async (skips and outcomes" in text("fast")
    assert "ledger commit" not in text("plain")


@pytest.mark.parametrize("size", [(80, 24), (100, 30)], ids=["80x24", "100x30"])
@pytest.mark.parametrize("read_only", [False, True], ids=["steering", "read-only"])
def test_describe_holder_keeps_its_release_line_in_view_over_a_long_body(
    size: tuple[int, int], read_only: bool
) -> None:
    """A holder whose facts run past the screen (a long query, as the demo's stale holder has):
    the body scrolls, and the key line saying how to release it stays in view, under the body
    and over the footer, without scrolling."""
    from dataclasses import replace

    from lockconsole.tui.screens.describe import HolderScreen

    query = "select pg_advisory_lock(42) /* " + "tenant batch " * 120 + "*/"
    long = replace(holder(stale=True), query=query)
    seen: dict[str, Any] = {}

    async def script(pilot: Any, app: Host) -> None:
        await pilot.pause()
        body = app.screen.query_one("#describe-body")
        hint = app.screen.query_one("#describe-hint", Static)
        seen.update(
            scrolls=body.max_scroll_y > 0,
            at=body.scroll_y,
            hint=hint.region,
            body=body.region,
            text=text_of(app, "#describe-hint").strip(),
            screen=app.size,
        )
        await pilot.press("escape")

    app = drive(lambda: HolderScreen(long, read_only=read_only), script, size=size)
    assert app.results == [None]
    assert seen["scrolls"] and seen["at"] == 0, seen  # the body does overflow, unscrolled
    width, height = size
    hint = seen["hint"]
    assert hint.height == 1 and 0 < hint.y < height - 1, seen  # above the footer's row
    assert hint.y >= seen["body"].bottom, seen  # under the body, not in it
    if read_only:
        assert seen["text"] == "read-only: release is refused"
    else:
        assert seen["text"].startswith("x: Terminate PostgreSQL backend pid"), seen
        assert seen["text"].endswith("(asks first)"), seen


def test_describe_waiter_has_no_release_line() -> None:
    """A waiter holds nothing to release: no key line under its body."""
    from lockconsole.tui.screens.describe import HolderScreen

    async def script(pilot: Any, app: Host) -> None:
        assert not app.screen.query("#describe-hint")
        await pilot.press("escape")

    drive(lambda: HolderScreen(holder(waiter=True)), script)
