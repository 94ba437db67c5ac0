"""The console's footer at 80 columns, read as the terminal would show it (the screen's last
rendered line): `? Help` and `q Quit` are in view on the dashboard, cut or not."""

from __future__ import annotations

from lockconsole.tui.app import LockConsoleApp
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import settle, sync


def app_for(console: SampleConsole, read_only: bool = False) -> LockConsoleApp:
    return LockConsoleApp(console, clock=lambda: FROZEN_NOW, refresh=3600, read_only=read_only)


def bottom_line(app) -> str:
    """The text of the screen's last rendered row: what the footer shows."""
    strips = app.screen._compositor.render_strips()
    return strips[-1].text


@sync
async def test_the_footer_at_80_columns_shows_help_and_quit() -> None:
    for read_only in (False, True):
        app = app_for(SampleConsole(), read_only=read_only)
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            footer = bottom_line(app)
            assert len(footer) <= 80, footer
            assert "? Help" in " ".join(footer.split()), footer
            assert "q Quit" in " ".join(footer.split()), footer
            assert footer.index("Help") < footer.index("Quit"), footer


@sync
async def test_other_screens_keep_quit_in_view_at_80_columns() -> None:
    app = app_for(SampleConsole())
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        for key, screen in (
            ("a", "AuditScreen"),
            ("question_mark", "HelpScreen"),
            ("w", "StoryScreen"),
            ("exclamation_mark", "AlertsScreen"),
        ):
            await pilot.press(key)
            await settle(app, pilot)
            assert type(app.screen).__name__ == screen
            footer = bottom_line(app)
            assert "q Quit" in " ".join(footer.split()) and len(footer) <= 80, (screen, footer)
            await pilot.press("escape")
            await settle(app, pilot)
