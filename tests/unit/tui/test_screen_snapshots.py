"""Snapshots of the release modal, the duplicates, timeline and audit screens at 80x24 and 120x40.

Deterministic: the fixed sample data set and its frozen clock (FROZEN_NOW), no database.
Regenerate with `pytest tests/unit/tui/test_screen_snapshots.py --snapshot-update`, then look.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen
from textual.widgets import Input

from lockconsole.tui.screens import DuplicatesScreen, TimelineScreen
from lockconsole.tui.screens.confirm import ReleaseModal
from lockconsole.tui.widgets.consequences import release_consequences
from tools.sample import FROZEN_NOW, sample_snapshot
from tools.sample_console import SampleConsole

from tests.support.helpers import settle as settle_app

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


class Host(App[None]):
    """A bare app that shows one screen."""

    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.first = screen

    def on_mount(self) -> None:
        self.push_screen(self.first)


async def settle(pilot: Any) -> None:
    """Let thread workers finish and their results land; stop the cursor blinking."""
    await settle_app(pilot.app, pilot)
    for field in pilot.app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_release_modal_of_the_stale_holder(snap_compare: Any, size: tuple[int, int]) -> None:
    holders = SampleConsole().snapshot().holders
    stale = next(h for h in holders if h.stale)
    causes = release_consequences(stale, holders)  # what the release causes, said first
    modal = ReleaseModal(stale, consequences=causes)
    assert snap_compare(Host(modal), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES)
def test_duplicates_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    async def select_second_group(pilot: Any) -> None:
        await settle(pilot)
        await pilot.press("down", "enter")
        await settle(pilot)

    screen = DuplicatesScreen(SampleConsole(), "nightly_billing")
    assert snap_compare(Host(screen), terminal_size=size, run_before=select_second_group)


@pytest.mark.parametrize("size", SIZES)
def test_timeline_of_the_triple_charge_night(snap_compare: Any, size: tuple[int, int]) -> None:
    screen = TimelineScreen(sample_snapshot(), "nightly_billing", now=FROZEN_NOW)
    assert snap_compare(Host(screen), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES)
def test_audit_screen(snap_compare: Any, size: tuple[int, int]) -> None:
    from lockconsole.tui.screens.audit import AuditScreen

    screen = AuditScreen(SampleConsole(), now=lambda: FROZEN_NOW)
    assert snap_compare(Host(screen), terminal_size=size, run_before=settle)
