"""Metrics: what a scrape adds to its snapshot, at production size.

A snapshot of 100 jobs, each with 500 attempts (5 instances, 100 slots) and its slot reports, as
`lockconsole metrics --listen` sees it once per scrape. lockconsole's side is what the exporter
does with it: the figures, and the counters advanced from it (every row already counted, as on
every scrape but the first). The raw side is `slot_reports` over the same runs: the console's
own work for that snapshot, so the ratio says what the exporter adds to what any snapshot costs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from .common import Row, config, main, median, timed

JOBS = 100
SLOTS = 100  # hourly slots per job
INSTANCES = 5
TARGET = 1.0  # the exporter's work at most the snapshot's own


def run() -> list[Row]:
    from lockconsole.console.snapshot.reports import slot_reports
    from lockconsole.metrics.counters import Counters
    from lockconsole.metrics.figures import figures, known_jobs
    from lockconsole.model.jobs import Run
    from lockconsole.model.views import Snapshot

    lines = ['[databases.main]\nurl = "postgresql://u@h/d"\n[console]\nlookback = "7d"']
    lines += [f'[jobs.j{n}]\nkey = {n + 1}\nschedule = "0 * * * *"' for n in range(JOBS)]
    cfg = config("\n".join(lines) + "\n")
    now = datetime(2026, 12, 1, tzinfo=UTC)
    runs: list[Any] = []
    for j in range(JOBS):
        for s in range(SLOTS):
            slot = now - timedelta(hours=s + 1)
            for i in range(INSTANCES):
                outcome = "succeeded" if i == 0 else "skipped"
                at = slot + timedelta(seconds=i)
                runs.append(
                    Run(
                        f"j{j}",
                        slot,
                        f"web-{i}",
                        "h",
                        1,
                        "scheduled",
                        outcome,
                        at,
                        at,
                        id=len(runs) + 1,
                    )  # fmt: skip
                )
    jobs = list(cfg.jobs.values())

    def reports() -> Any:
        return slot_reports(jobs, runs, now=now, lookback=cfg.console.lookback, grace=timedelta(0))

    snap = Snapshot(taken_at=now, runs=tuple(runs), slots=tuple(reports()))
    counters = Counters(cfg)
    counters.advance(snap, known_jobs(snap, cfg))  # the first scrape: the base

    def scrape() -> None:
        known = known_jobs(snap, cfg)
        figures(snap, cfg, 0.0)
        counters.advance(snap, known)
        counters.figures(known)

    def count() -> None:
        known = known_jobs(snap, cfg)
        counters.advance(snap, known)
        counters.figures(known)

    ours = median(timed(scrape) for _ in range(5))
    alone = median(timed(count) for _ in range(5))
    raw = median(timed(reports) for _ in range(5))
    return [
        Row(
            f"metrics: figures and counters of {len(runs):,} runs, {len(snap.slots):,} slots",
            ours,
            raw,
            "s",
            TARGET,
            note="raw column = slot_reports over the same runs (the snapshot's own work); "
            "most of it is each job's period, from its last 64 firings",
        ),
        Row(
            f"metrics: the counters alone over {len(runs):,} runs",
            alone,
            raw,
            "s",
            0.5,
            note="raw column = slot_reports over the same runs; a snapshot holds at most "
            "[console] history_limit attempts per ledger, so 50,000 is the worst case",
        ),
    ]


if __name__ == "__main__":
    main(run)
