"""Console fleet: UI-thread time of a refresh with 200 jobs on 50 instances, against the
existing refresh budgets (20 ms with no change, 50 ms with change).

The snapshot is what the console's facade makes of such a fleet's ledger: 200 per-minute jobs,
each slot of a 3-hour lookback judged (36,000 slot reports: one instance ran, 49 skipped), a
page of 500 attempts, and each job's newest run. The app runs headless over a SampleConsole
holding that snapshot; a refresh posts it again (no change) or the next minute's (every job's
slot moves on), and the UI thread's CPU time is taken until the app is idle and repainted. The
raw side is the same time for the stock 3-job sample snapshot.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import replace
from datetime import timedelta
from typing import Any

from .common import Row, main, median, progress

JOBS = 200
INSTANCES = 50
LOOKBACK_MINUTES = 180
PAGE = 500
ROUNDS = 10
SIZE = (160, 50)
NO_CHANGE_LIMIT = 0.020
CHANGE_LIMIT = 0.050


def _fleet(minutes_on: int = 0) -> Any:
    """The fleet's snapshot, `minutes_on` minutes after the sample's moment."""
    from lockconsole.console.snapshot.reports import judge_slots
    from lockconsole.model.jobs import Job, LockKey
    from lockconsole.model.verdict import SlotTally, Span
    from lockconsole.model.views import JobStatus, Snapshot
    from tools.sample import FROZEN_NOW, make_run

    now = FROZEN_NOW.replace(second=0, microsecond=0) + timedelta(minutes=minutes_on)
    jobs = [
        Job(
            name=f"fleet_{j:03d}",
            database="main",
            strategy="pg-session",
            key=LockKey("int64", 1000 + j),
            schedule="* * * * *",
        )  # fmt: skip
        for j in range(JOBS)
    ]
    tallies = []
    for j, job in enumerate(jobs):
        for m in range(1, LOOKBACK_MINUTES + 1):
            slot = now - timedelta(minutes=m)
            ran = Span(
                f"web-{(j + m) % INSTANCES}", "succeeded", slot, slot + timedelta(seconds=2), None
            )
            tallies.append(SlotTally(job.name, slot, False, (ran,), INSTANCES - 1, 0, slot, ()))
    reports = judge_slots(jobs, tallies, now=now, lookback=timedelta(minutes=LOOKBACK_MINUTES),
                          grace=timedelta(minutes=5))  # fmt: skip
    runs = [
        make_run(
            i + 1,
            jobs[i % JOBS].name,
            now - timedelta(minutes=1 + i // JOBS),
            f"web-{i % INSTANCES}",
            "succeeded",
            0.1,
            2.0,
        )  # fmt: skip
        for i in range(PAGE)
    ]
    newest = {r.job: r for r in reversed(runs)}
    return Snapshot(
        taken_at=now,
        jobs=tuple(
            JobStatus(j, now + timedelta(minutes=1), None, newest.get(j.name)) for j in jobs
        ),
        runs=tuple(runs),
        slots=tuple(reports),
    )


async def _refreshes(snapshots: list[Any]) -> dict[str, float]:
    from lockconsole.tui.app import LockConsoleApp
    from lockconsole.tui.messages import SnapshotLoaded
    from tools.sample_console import SampleConsole

    facade = SampleConsole()
    facade.set_snapshot(snapshots[0])
    app = LockConsoleApp(facade, refresh=3600)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()

        async def refresh(snap: Any) -> float:
            # the refresh worker's part (LockConsoleApp.prepare: the snapshot's indexes, the
            # panes laid out, the collector settled), off the UI thread
            board = app.dashboard
            snap, rows = app.prepare(
                snap, app.snapshot, board.pane_view(), board.older_runs(), board.panes
            )
            t0 = time.thread_time()
            app.post_message(SnapshotLoaded(snap, rows, 0.0))
            await pilot.pause()
            await pilot.wait_for_scheduled_animations()
            return time.thread_time() - t0

        same = [await refresh(snapshots[0]) for _ in range(ROUNDS)]
        moved = [await refresh(snapshots[1 + r % (len(snapshots) - 1)]) for r in range(ROUNDS)]
    return {"same": median(same), "moved": median(moved)}


def run() -> list[Row]:
    from tools.sample import sample_snapshot

    progress(f"console fleet: {JOBS} jobs x {INSTANCES} instances, {LOOKBACK_MINUTES} min judged")
    fleet = [_fleet(m) for m in range(3)]
    small = sample_snapshot()
    base = asyncio.run(_refreshes([small, replace(small, taken_at=small.taken_at)]))
    got = asyncio.run(_refreshes(fleet))
    note = f"{len(fleet[0].slots):,} slot reports, {PAGE} runs; raw = the 3-job sample snapshot"
    return [
        Row(
            f"console fleet: refresh, no change ({JOBS} jobs x {INSTANCES} instances)",
            got["same"],
            base["same"],
            "s",
            limit=NO_CHANGE_LIMIT,
            note=note,
        ),  # fmt: skip
        Row(
            f"console fleet: refresh, next minute ({JOBS} jobs x {INSTANCES} instances)",
            got["moved"],
            base["moved"],
            "s",
            limit=CHANGE_LIMIT,
            note=note,
        ),  # fmt: skip
    ]


if __name__ == "__main__":
    main(run)
