"""The story screen and time travel on a real PostgreSQL: a ledger of real `run_once` attempts
and a holder journal written by a real console's snapshots, with a foreign session (an app's
own fix, psql) that held the job's lock over the slot and then left.

The story names the skipped attempt, the one that failed and the one that retried the slot, the
foreign holder with its seen-interval, and the verdict; time travel to a moment while the
foreign session held the lock shows it in the holders pane, from the journal, with the history
as of then; `N` is now again, where that session is gone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from lockconsole import run_once
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.story import StoryScreen
from lockconsole.tui.widgets.holders.view import HoldersView

from tests.support import helpers
from tests.support.helpers import first_data, settle, until

FOREIGN = "psql-foreign"


def foreign_holder(url: str, key: int) -> psycopg.Connection:
    """A session outside lockconsole holding the job's advisory lock."""
    conn = psycopg.connect(url, autocommit=True, application_name=FOREIGN)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    return conn


def let_go(url: str, holder: psycopg.Connection) -> None:
    pid = holder.info.backend_pid
    holder.close()
    with psycopg.connect(url, autocommit=True) as conn:
        helpers.wait_for(
            lambda: conn.execute(
                "SELECT count(*) = 0 FROM pg_locks WHERE pid = %s", (pid,)
            ).fetchone()[0],
            what="the foreign session ended",
        )


def attempt(config: Any, job: str, instance: str, slot: datetime, fail: bool = False) -> bool:
    try:
        with run_once(
            job, config=config, instance=instance, slot=slot, reuse_connections=False
        ) as a:
            if fail and a.acquired:
                raise RuntimeError("billing run crashed")
            return a.acquired
    except RuntimeError:
        return True


def plain(app: LockConsoleApp, selector: str) -> str:
    import io

    from rich.console import Console as RichConsole
    from textual.widgets import Static

    out = RichConsole(width=400, record=True, file=io.StringIO())
    out.print(app.screen.query_one(selector, Static).render())
    return " ".join(out.export_text().split())


def test_story_and_time_travel_on_a_real_ledger_and_journal(own_database: str, uid: str) -> None:
    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    key = int(str(config.job(job).key))
    slot = (datetime.now(UTC) - timedelta(days=1)).replace(
        hour=2, minute=0, second=0, microsecond=0
    )
    console = Console(config, journal=True)
    try:
        console.snapshot(duplicates=False)  # a sample before the foreign session came
        foreign = foreign_holder(own_database, key)
        foreign_pid = foreign.info.backend_pid
        console.snapshot(duplicates=False)  # the journal sees it
        assert not attempt(config, job, "web-1", slot), "web-1 finds the lock held: skipped"
        held = console.snapshot(duplicates=False).taken_at  # seen holding it again: surely held
        let_go(own_database, foreign)
        console.snapshot(duplicates=False)  # the journal sees it gone
        assert attempt(config, job, "web-2", slot, fail=True)
        assert attempt(config, job, "web-3", slot), "a failed slot is tried again"
        helpers.sync(_drive)(console, job, slot, held, foreign_pid)
    finally:
        console.close()


async def _drive(
    console: Console, job: str, slot: datetime, held: datetime, foreign_pid: int
) -> None:
    app = LockConsoleApp(console, refresh=3600)
    async with app.run_test(size=(160, 50)) as pilot:
        await first_data(app, pilot)
        app.dashboard.open_story(job, slot)
        await until(pilot, lambda: isinstance(app.screen, StoryScreen), what="the story")
        screen = app.screen
        assert isinstance(screen, StoryScreen)
        await until(pilot, lambda: screen.story is not None, what="the story read")
        await settle(app, pilot)
        story = screen.story
        assert story is not None
        lines = list(screen.lines.values())
        whats = [(line.source, line.who, line.what) for line in lines]
        assert [ln.at for ln in lines if ln.at] == sorted(ln.at for ln in lines if ln.at)
        foreign = [w for w in whats if w[0] == "foreign"]
        assert foreign and foreign[0][1].startswith(f"{FOREIGN} pid {foreign_pid}")
        assert "(seen " in foreign[0][2] and "outside lockconsole" in foreign[0][2]
        assert any(w[0] == "foreign" and w[2].startswith("gone from") for w in whats)
        runs = {r.instance: r for r in story.attempts}
        assert runs["web-1"].outcome == "skipped"
        assert any(
            w[1] == "web-1" and w[2].startswith(f"run {runs['web-1'].id}: skipped") for w in whats
        )
        for instance, outcome in (("web-2", "failed"), ("web-3", "succeeded")):
            rid = runs[instance].id
            assert ("attempt", instance, f"run {rid}: acquired, started the job") in whats
            assert any(w[1] == instance and w[2].startswith(f"run {rid}: {outcome}") for w in whats)
        assert "billing run crashed" in next(
            w[2] for w in whats if w[1] == "web-2" and "failed" in w[2]
        )
        verdict = plain(app, "#story-verdict")
        assert verdict.startswith("Verdict: retried: ran on web-2, web-3 one after another"), (
            verdict
        )
        assert f"held outside lockconsole by {FOREIGN} pid {foreign_pid}" in verdict
        assert not [u for u in story.unknown if u[0] == "holder journal"], story.unknown
        # back to the moment the foreign session was seen holding the lock
        app.travel_to(held, "test")
        await until(pilot, lambda: app.past is not None, what="the past")
        await settle(app, pilot)
        view = app.query_one(HoldersView)
        past = [r.holder for r in view.model.rows if r.holder is not None]
        assert [(h.pid, h.application_name, h.key) for h in past] == [
            (foreign_pid, FOREIGN, str(int(str(console.config.job(job).key))))
        ]
        assert "MAYBE" not in (past[0].hidden or "") and "seen " in (past[0].hidden or "")
        assert app.snapshot is not None
        assert [(r.instance, r.outcome) for r in app.snapshot.runs] == [("web-1", "skipped")]
        assert plain(app, "#status").startswith("PAST ")
        await pilot.press("N")
        await until(pilot, lambda: app.past is None, what="back to now")
        await until(pilot, lambda: app.refresh_started is None, what="the refresh")
        await settle(app, pilot)
        now = [r.holder for r in app.query_one(HoldersView).model.rows if r.holder is not None]
        assert all(h.pid != foreign_pid for h in now), "now the foreign session is gone"
        assert {r.instance for r in app.snapshot.runs if r.job == job} == {
            "web-1",
            "web-2",
            "web-3",
        }
