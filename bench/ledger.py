"""Ledger: writing 100,000 attempts with `Ledger.record`, and slot reports over them.

Writes: lockconsole's Ledger.record (one INSERT ... RETURNING id per attempt, on its kept
autocommit connection) against the same INSERT through psycopg into a copy of the table,
interleaved in blocks of 1,000; the figure is the median cost per row, and the growth is the
cost per row of the last 10,000 over the first 10,000 (index growth; flat is good).

Reports: `reports.slot_reports` over the first 10,000 and over all 100,000 recorded runs
(10 jobs firing every minute, three instances per slot: one ran, two skipped). There is no
raw side; the figure is time per run, and the growth from 10k to 100k should stay linear.
"""

from __future__ import annotations

import os
import socket
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from .common import Row, config, interleave, main, median, pg_url, progress, raw_pg, timed, uid

TOTAL = int(os.environ.get("LOCKCONSOLE_BENCH_LEDGER_ROWS", 100_000))
BLOCK = 1_000
JOBS = 10
INSTANCES = ("web-1", "web-2", "web-3")
GROWTH_LIMIT = 1.5  # slot_reports at 100k over 10x its time at 10k
INSERT = """INSERT INTO {t} (job, slot, instance, host, pid, "trigger", outcome, started_at,
    finished_at, exit_code, message, fencing_token, session_id, strategy, lock_key)
VALUES (%(job)s, %(slot)s, %(instance)s, %(host)s, %(pid)s, %(trigger)s, %(outcome)s,
    %(started_at)s, %(finished_at)s, %(exit_code)s, %(message)s, %(fencing_token)s,
    %(session_id)s, %(strategy)s, %(lock_key)s)
RETURNING id"""


def attempts(u: str, count: int, start: datetime) -> list[Any]:
    """`count` attempts: jobs x slots x instances, one acquired-then-succeeded, two skipped."""
    from lockconsole.model.jobs import Run

    host, pid = socket.gethostname(), os.getpid()
    out = []
    i = 0
    while len(out) < count:
        slot = start + timedelta(minutes=i // JOBS)
        job = f"bench_ledger_{u}_{i % JOBS}"
        for n, instance in enumerate(INSTANCES):
            began = slot + timedelta(milliseconds=300 * n)
            done = (
                {
                    "outcome": "succeeded",
                    "finished_at": began + timedelta(seconds=5),
                    "exit_code": 0,
                }
                if n == 0
                else {
                    "outcome": "skipped",
                    "finished_at": began,
                    "message": "lock held by another session",
                }
            )
            out.append(
                Run(
                    job=job,
                    slot=slot,
                    instance=instance,
                    host=host,
                    pid=pid,
                    trigger="scheduled",
                    started_at=began,
                    session_id=1000 + n,
                    strategy="pg-session",
                    lock_key="4242",
                    **done,
                )
            )
        i += 1
    return out[:count]


def run() -> list[Row]:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.console.snapshot.reports import slot_reports

    u = uid()
    raw_table = f"bench_raw_runs_{u}"
    cfg = config(f'[databases.main]\nurl = "{pg_url()}"\n')
    start = datetime(2026, 1, 1, tzinfo=UTC)
    runs = attempts(u, TOTAL, start)
    ledger = Ledger(cfg.databases["main"])
    raw = raw_pg()
    recorded: list[Any] = []
    try:
        ledger.create_schema()
        raw.execute(f"CREATE TABLE {raw_table} (LIKE lockconsole_runs INCLUDING ALL)")
        sql = INSERT.format(t=raw_table)
        blocks = [runs[i : i + BLOCK] for i in range(0, len(runs), BLOCK)]
        feed = {"lockconsole": iter(blocks), "raw": iter(blocks)}

        def lc_block() -> float:
            block = next(feed["lockconsole"])
            return timed(lambda: recorded.extend(ledger.record(r) for r in block)) / len(block)

        def raw_block() -> float:
            block = next(feed["raw"])

            def write() -> None:
                for r in block:
                    params = {k: v for k, v in vars(r).items() if k != "id"}
                    raw.execute(sql, params).fetchone()

            return timed(write) / len(block)

        progress(f"ledger: {TOTAL:,} records per side, interleaved in blocks of {BLOCK:,}")
        per_row = interleave({"lockconsole": lc_block, "raw": raw_block}, len(blocks))
        tenth = max(1, len(blocks) // 10)
        growth = {side: median(v[-tenth:]) / median(v[:tenth]) for side, v in per_row.items()}
        write = {side: median(v) for side, v in per_row.items()}

        jobs = [replace(j, name=f"bench_ledger_{u}_{n}") for n, j in enumerate(_jobs(cfg))]
        now = max(r.slot for r in recorded) + timedelta(minutes=1)
        lookback = now - start + timedelta(hours=1)

        def report(subset: list[Any]) -> float:
            return timed(
                lambda: slot_reports(
                    jobs, subset, now=now, lookback=lookback, grace=timedelta(minutes=5)
                )
            )

        small = recorded[: TOTAL // 10]
        progress("ledger: slot reports over 10k and 100k runs")
        rep = interleave({"10k": lambda: report(small), "100k": lambda: report(recorded)}, 5)
        rep_small, rep_big = median(rep["10k"]), median(rep["100k"])
    finally:
        raw.execute(f"DROP TABLE IF EXISTS {raw_table}")  # our own table, named per run
        raw.execute("DELETE FROM lockconsole_runs WHERE job LIKE %s", (f"bench_ledger_{u}_%",))
        raw.execute(
            "VACUUM lockconsole_runs"
        )  # the next run's figures should not wade through them
        raw.close()
        ledger.close()
    n = len(recorded)
    linear = rep_small * n / len(small)
    return [
        Row(
            f"ledger: record ({n:,} attempts), per row",
            write["lockconsole"],
            write["raw"],
            "s",
            status="info",
            note=f"{1 / write['lockconsole']:,.0f} rows/s (raw {1 / write['raw']:,.0f} rows/s)",
        ),
        Row(
            "ledger: record per-row cost, last 10% / first 10%",
            growth["lockconsole"],
            growth["raw"],
            "x",
            status="info",
            note="how a row's cost grows from the first 10k to the last 10k; raw grows alike",
        ),
        Row(
            f"ledger: slot_reports over {len(small):,} runs",
            rep_small,
            None,
            "s",
            note=f"{len(small) / rep_small:,.0f} runs/s",
        ),
        Row(
            f"ledger: slot_reports over {n:,} runs",
            rep_big,
            linear,
            "s",
            GROWTH_LIMIT,
            note=f"{n / rep_big:,.0f} runs/s; raw column = the {len(small):,}-run time x "
            f"{n // len(small)} (linear growth), so the ratio is growth over linear",
        ),
    ]


def _jobs(cfg: Any) -> list[Any]:
    """JOBS scheduled jobs (every minute), for slot_reports' missed-slot search."""
    lines = [f'[databases.main]\nurl = "{pg_url()}"']
    for n in range(JOBS):
        lines.append(f'[jobs.j{n}]\nstrategy = "pg-session"\nschedule = "* * * * *"')
    return list(config("\n".join(lines) + "\n").jobs.values())


if __name__ == "__main__":
    main(run)
