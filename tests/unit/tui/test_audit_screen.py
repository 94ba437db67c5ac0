"""The console's audit screen at 80 columns: its first column (when) stays in place as the
table scrolls right to the last, and Enter (or i) shows one entry whole in a modal, Escape
closes it."""

from __future__ import annotations

from typing import Any

from textual.widgets import DataTable

from lockconsole.text.times import clock
from lockconsole.tui.app import LockConsoleApp
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import settle, sync, until


def screen_lines(app: Any) -> list[str]:
    """The screen's rendered rows, as the terminal shows them."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


@sync
async def test_the_audit_keeps_its_first_column_and_shows_an_entry_whole() -> None:
    console = SampleConsole()
    entries, _ = console.audit()
    newest = entries[0]
    app = LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "AuditScreen"
        table = app.screen.query_one("#audit", DataTable)
        await until(pilot, lambda: table.row_count == len(entries), what="the audit's rows")
        assert table.fixed_columns == 1
        assert table.max_scroll_x > 0, "at 80 columns the audit is wider than the screen"
        at = clock(newest.at, FROZEN_NOW)

        def row_of_newest() -> str | None:
            return next((line for line in screen_lines(app) if line.strip().startswith(at)), None)

        before = row_of_newest()
        assert before is not None and newest.action in before, before
        assert "i Detail" in screen_lines(app)[-1], "the footer names the detail's key"
        table.scroll_to(x=table.max_scroll_x, animate=False)
        await pilot.pause()
        await pilot.pause()
        after = row_of_newest()
        assert after is not None, screen_lines(app)  # when: still there
        assert newest.message is not None and newest.message in after, after  # the last column
        assert newest.action not in after, after  # the columns between scrolled away

        table.move_cursor(row=0)
        await pilot.press("enter")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "AuditDetailScreen"
        shown = " ".join(" ".join(screen_lines(app)).split())
        for part in (newest.target, newest.message, f"{newest.os_user}@{newest.host}"):
            assert part in shown, (part, shown)
        await pilot.press("escape")
        await settle(app, pilot)
        assert type(app.screen).__name__ == "AuditScreen"
        table.move_cursor(row=1)
        await pilot.press("i")  # as on the dashboard: i describes too
        await settle(app, pilot)
        assert type(app.screen).__name__ == "AuditDetailScreen"
        assert entries[1].target in " ".join(" ".join(screen_lines(app)).split())
