"""`python -m tools.screenshots FOLDER`: SVG screenshots written by the app itself.

The console runs headless on the fixed sample data set (SampleConsole, frozen clock) at
120x40, is driven by keys like an operator, and saves each view with App.save_screenshot:
dashboard, release modal, the describe screens of the stale holder and of a job, duplicates
screen, timeline, help, audit, the story of the unguarded night (2026-11-27 02:00 UTC) and the
dashboard with its clock set back into that night. `make screenshots` runs it.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual.widgets import Input

from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.view import HoldersView
from tools.sample import FROZEN_NOW
from tools.sample_console import SampleConsole

SIZE = (120, 40)
VIEWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("dashboard", ()),
    ("release-modal", ("2", "stale-holder", "x")),
    ("describe-holder", ("2", "stale-holder", "enter")),
    ("describe-job", ("1", "enter")),
    ("duplicates", ("1", "d")),
    ("timeline", ("1", "s")),
    ("help", ("question_mark",)),
    ("audit", ("a",)),
    ("story", ("night-story",)),
    ("past", ("night-story", "down", "down", "down", "b")),  # at web-3's start, 02:00:00.600
)
NIGHT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)  # the sample's unguarded night


async def _settle(app: LockConsoleApp, pilot: Any) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    for field in app.screen.query(Input):
        field.cursor_blink = False
    await pilot.pause()


async def _shoot(folder: Path, name: str, keys: tuple[str, ...], size: tuple[int, int]) -> Path:
    app = LockConsoleApp(SampleConsole(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=size) as pilot:
        await _settle(app, pilot)
        for key in keys:
            if key == "stale-holder":  # put the cursor on the stale psql session
                view = app.query_one(HoldersView)
                view._move(
                    next(
                        i
                        for i, r in enumerate(view.model.rows)
                        if r.holder is not None and r.holder.stale
                    )
                )
            elif key == "night-story":  # the story of the unguarded night, as `w` opens it
                app.dashboard.open_story("nightly_billing", NIGHT)
            else:
                await pilot.press(key)
            await _settle(app, pilot)
        return Path(app.save_screenshot(f"{name}.svg", str(folder)))


def write_screenshots(folder: str | Path, size: tuple[int, int] = SIZE) -> list[Path]:
    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)

    async def all_views() -> list[Path]:
        return [await _shoot(out, name, keys, size) for name, keys in VIEWS]

    return asyncio.run(all_views())


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    folder = args[0] if args else "screenshots"
    for path in write_screenshots(folder):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
