"""Snapshots of the story screen (the unguarded night of the sample: a double run with a foreign
psql holder, an audited release, 120 duplicate keys) at 80x24 and 120x40, and of the dashboard
with its clock set back to that night.

Deterministic: the fixed sample data set and its frozen clock (FROZEN_NOW), no database.
Regenerate with `pytest tests/unit/tui/test_story_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen

from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.story import StoryScreen
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import settle as settle_app
from tests.support.helpers import until

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]
NIGHT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)


class Host(App[None]):
    """A bare app that shows one screen."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


async def settle(pilot: Any) -> None:
    await settle_app(pilot.app, pilot)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_story_of_the_unguarded_night(snap_compare: Any, size: tuple[int, int]) -> None:
    screen = StoryScreen(SampleConsole(), "nightly_billing", NIGHT)
    assert snap_compare(Host(screen), terminal_size=size, run_before=settle)


def test_the_dashboard_in_the_past(snap_compare: Any) -> None:
    async def back_to_the_release(pilot: Any) -> None:
        app = pilot.app
        await until(pilot, lambda: app.snapshot is not None, what="the first snapshot")
        await settle(pilot)
        app.travel_to(NIGHT + timedelta(seconds=3), "the story of nightly_billing")
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(pilot)

    app = LockConsoleApp(SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600)
    assert snap_compare(app, terminal_size=(100, 30), run_before=back_to_the_release)
