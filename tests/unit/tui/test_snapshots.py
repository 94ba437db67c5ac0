"""Snapshots of the dashboard at 80x24 and 120x40 on the fixed sample data and a frozen clock.

Regenerate with `pytest tests/unit/tui/test_snapshots.py --snapshot-update`, then look at them.
"""

from __future__ import annotations

from typing import Any

import pytest

from lockconsole.tui.app import LockConsoleApp
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data

SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40")]


def dashboard(**kwargs: Any) -> LockConsoleApp:
    return LockConsoleApp(SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600, **kwargs)


async def loaded(pilot: Any) -> None:
    await first_data(pilot.app, pilot)


@pytest.mark.parametrize("size", SIZES)
def test_dashboard(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(dashboard(), terminal_size=size, run_before=loaded)


def test_dashboard_read_only_grouped_by_session(snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await loaded(pilot)
        await pilot.press("2", "g", "down", "down")
        await pilot.pause()

    assert snap_compare(dashboard(read_only=True), terminal_size=(80, 24), run_before=run_before)
