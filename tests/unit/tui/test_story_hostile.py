"""The story screen and the dashboard in the past on hostile data (tests/data/hostile_strings.json):
every string of the corpus as an instance, a run's message and output, a holder's application,
client, user and key, an audit entry's actor, target and message, an alert, a duplicate key, a
part that could not be read. The bytes the driver would write hold no control sequence but the
console's own (colours and cursor moves): the data shows as visible escapes, never as markup."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from textual.widgets import DataTable

from lockconsole.model.story import events, verdict
from lockconsole.model.views import Alert, AuditEntry, DuplicateGroup, JournalEntry, SlotStory
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.run_detail import RunDetailScreen
from lockconsole.tui.screens.story import StoryScreen
from tools.sample import FROZEN_NOW, make_run
from tools.sample_console import SampleConsole

from tests.support.helpers import first_data, settle, sync, until
from tests.support.hostile import corpus, raw_controls

OWN_SEQUENCES = re.compile(r"\x1b\[[0-9;]*m|\x1b\[\d+;\d+H")  # what Textual itself writes
NIGHT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
STRINGS = [text for _, text, _ in corpus()]


def terminal(app: LockConsoleApp) -> str:
    """Exactly what the driver would write for a full repaint of the current screen."""
    update = app.screen._compositor.render_full_update()
    return update.render_segments(app.console)


def assert_inert(app: LockConsoleApp, where: str) -> str:
    out = terminal(app)
    assert out.count("\n") < app.size.height, where  # one line per row: nothing scrolls
    leftover = OWN_SEQUENCES.sub("", out)
    assert not raw_controls(leftover), (where, raw_controls(leftover))
    return out


def entry(i: int, text: str) -> JournalEntry:
    return JournalEntry(
        id=i, database="billing", kind="advisory", source="pg_locks", key=text,
        job="nightly_billing",
        pid=30000 + i, application=text, client=text, user=text, mode="ExclusiveLock",
        locked_by=None, session_start=None, seen_after=NIGHT - timedelta(seconds=4),
        first_seen=NIGHT - timedelta(seconds=2), last_seen=NIGHT + timedelta(seconds=5),
        gone_by=NIGHT + timedelta(seconds=7), earliest=NIGHT - timedelta(seconds=4),
    )  # fmt: skip


def hostile_story(job: str, slot: datetime) -> SlotStory:
    runs = [
        make_run(
            900 + i, job, slot, text, "succeeded" if i % 3 else "skipped", 0.1 * i, 5.0,
            message=text,
        )
        for i, text in enumerate(STRINGS)
    ]  # fmt: skip
    audit = [
        AuditEntry(i, slot + timedelta(seconds=i), text, text, "release", "billing", text,
                   "released", text, job)
        for i, text in enumerate(STRINGS)
    ]  # fmt: skip
    story = SlotStory(
        job=job,
        slot=slot,
        ledger="billing",
        taken_at=FROZEN_NOW,
        since=slot - timedelta(minutes=2),
        until=slot + timedelta(minutes=15),
        attempts=tuple(runs),
        outputs=tuple((r.id or 0, "\n".join(STRINGS)) for r in runs if r.outcome != "skipped"),
        holders=tuple(entry(i, text) for i, text in enumerate(STRINGS)),
        audit=tuple(audit),
        alerts=tuple(Alert("double_run", job, text, slot) for text in STRINGS),
        duplicates=tuple(DuplicateGroup((text, text), 2, (901,)) for text in STRINGS),
        status="double_run",
        overlap=4.0,
        unknown=tuple(("holder journal", text) for text in STRINGS[:3]),
    )
    return replace(story, verdict=verdict(story, job), events=tuple(events(story)))


class HostileConsole(SampleConsole):
    def story(self, job_name: str, slot: datetime) -> SlotStory:
        return hostile_story(job_name, slot)

    def holders_at(self, at: datetime, **kw: Any) -> Any:
        return [entry(i, text) for i, text in enumerate(STRINGS)], [("billing", STRINGS[6])]


@pytest.mark.parametrize("size", [(80, 24), (160, 50)], ids=["80x24", "160x50"])
@sync
async def test_the_story_and_the_past_keep_hostile_data_literal(size: tuple[int, int]) -> None:
    app = LockConsoleApp(HostileConsole(), clock=lambda: FROZEN_NOW, refresh=3600)
    async with app.run_test(size=size) as pilot:
        await first_data(app, pilot)
        app.dashboard.open_story("nightly_billing", NIGHT)
        await until(pilot, lambda: isinstance(app.screen, StoryScreen), what="the story")
        screen = app.screen
        assert isinstance(screen, StoryScreen)
        await until(pilot, lambda: screen.story is not None, what="the story read")
        await settle(app, pilot)
        out = assert_inert(app, "story")
        assert "\\x1b" in out, "the escapes are shown, visibly"
        assert "[bold]" in out or "[/]" in out, "markup is shown as text, not applied"
        table = screen.query_one("#story-events", DataTable)
        for row in range(0, table.row_count, 7):  # every kind of line, each shown in full below
            table.move_cursor(row=row)
            await pilot.pause()
            assert_inert(app, f"story line {row}")
        table.move_cursor(row=table.get_row_index("run:901:end"))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, RunDetailScreen), what="run detail")
        await settle(app, pilot)
        assert_inert(app, "the run's output")
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, what="the story again")
        await pilot.press("b")
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(app, pilot)
        out = assert_inert(app, "the dashboard in the past")
        assert "THE PAST" in out and "\\x1b" in out
