"""Prune: `lockconsole prune` of a PostgreSQL ledger of $LOCKCONSOLE_BENCH_PRUNE_ROWS attempts
(default 10,000,000), nine tenths of them older than the retention, filled in bulk
(INSERT ... SELECT over generate_series, in chunks of a million).

Figures: the rate (rows pruned per second, each slot judged by verdict.slot_status and its
summary kept when it was not plain ok) against a raw batched DELETE of the same rows (keyset on
started_at, the same batch size, no judging) after the same fill; the longest lock it held (one
batch's write transaction: on PostgreSQL its one statement, from start to end by the server's
clock, which is when its row locks are held; target <= 100 ms) and its longest batch (its
reads and its write, by this client's clock, the round trips included); and the
longest wait of the run path's ledger writes (record + finish) on another connection meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from datetime import timedelta
from typing import Any

from .common import Row, config, main, pg_url, progress, raw_pg, uid

TOTAL = int(os.environ.get("LOCKCONSOLE_BENCH_PRUNE_ROWS", 10_000_000))
CHUNK = 1_000_000
LOCK_LIMIT = 0.100  # seconds: the longest transaction a prune batch may hold
FILL = """
INSERT INTO lockconsole_runs
    (job, slot, instance, host, pid, "trigger", outcome, started_at, finished_at)
SELECT 'bench_prune_' || ((g / 3) %% 20), s.slot, 'web-' || (g %% 3), 'h', 1, 'scheduled',
       CASE WHEN g %% 3 = 0 THEN 'succeeded' ELSE 'skipped' END,
       s.slot + (g %% 3) * interval '300 milliseconds',
       s.slot + (g %% 3) * interval '300 milliseconds'
              + CASE WHEN g %% 3 = 0 THEN interval '5 seconds' ELSE interval '0' END
FROM generate_series(%(first)s, %(last)s) g,
     LATERAL (SELECT %(base)s::timestamptz + (g / 60) * interval '1 minute' AS slot) s
"""
RAW_BATCH = """
DELETE FROM lockconsole_runs WHERE id IN (
    SELECT id FROM lockconsole_runs WHERE started_at < %(cutoff)s
    ORDER BY started_at, id LIMIT %(limit)s)
"""


def _fill(conn: Any, total: int) -> Any:
    """`total` attempts (20 per-minute jobs on 3 instances), the first nine tenths older than
    the 90-day retention; the cutoff's neighbourhood holds none. The server's now."""
    now = conn.execute("SELECT now()").fetchone()[0]
    old = total * 9 // 10
    base = now - timedelta(days=91) - timedelta(minutes=old // 60 + 1)
    # the newest tenth lies after the cutoff: shifted two days past the retention's edge
    for start, end, shift in ((0, old, timedelta(0)), (old, total, timedelta(days=2))):
        for first in range(start, end, CHUNK):
            last = min(end, first + CHUNK) - 1
            conn.execute(FILL, {"first": first, "last": last, "base": base + shift})
            progress(f"prune: filled {last + 1:,} of {total:,}")
    conn.execute("ANALYZE lockconsole_runs")
    return now


def run() -> list[Row]:
    from lockconsole.backends.ledger.retention.prune import BATCH, prune
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

    name = f"bench_prune_{uid()}"
    admin = raw_pg()
    admin.execute(f'CREATE DATABASE "{name}"')  # named per run, dropped below
    url = pg_url(name)
    database = config(f'[databases.main]\nurl = "{url}"\n').databases["main"]
    waits: list[float] = []
    baseline: list[float] = []
    try:
        with Ledger(database) as ledger:
            ledger.create_schema()
        import psycopg

        conn = psycopg.connect(url, autocommit=True)
        _fill(conn, TOTAL)
        old = conn.execute(
            "SELECT count(*) FROM lockconsole_runs WHERE started_at < now() - interval '90 days'"
        ).fetchone()[0]
        result: dict[str, Any] = {}
        worker = threading.Thread(
            target=lambda: result.update(report=prune(database, timedelta(days=90)))
        )
        progress(f"prune: pruning {old:,} of {TOTAL:,} rows in batches of {BATCH:,}")
        with Ledger(database) as writer:
            slot = writer.now().replace(second=0, microsecond=0)
            quiet_until = time.monotonic() + 3.0  # the same writes without a prune, first
            started = False
            while True:
                if not started and time.monotonic() > quiet_until:
                    worker.start()
                    started, baseline, waits = True, waits, []
                elif started and not worker.is_alive():
                    break
                began = time.perf_counter()
                attempt = writer.record(
                    Run(
                        job="bench_prune_live",
                        slot=slot,
                        instance="web-1",
                        host="h",
                        pid=1,
                        trigger="scheduled",
                        outcome="acquired",
                        started_at=writer.now(),
                    )
                )
                writer.finish(attempt, "succeeded", exit_code=0)
                waits.append(time.perf_counter() - began)
                slot += timedelta(minutes=1)
                time.sleep(0.05)
            worker.join()
        report = result["report"]

        progress("prune: the raw batched DELETE after the same fill")
        conn.execute("TRUNCATE lockconsole_runs")
        _fill(conn, TOTAL)
        cutoff = conn.execute("SELECT now() - interval '90 days'").fetchone()[0]
        raw_rows, began = 0, time.perf_counter()
        while True:
            deleted = conn.execute(RAW_BATCH, {"cutoff": cutoff, "limit": BATCH}).rowcount
            raw_rows += deleted
            if deleted < BATCH:
                break
        raw_took = time.perf_counter() - began
        conn.close()
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()
    rate = report.runs / report.elapsed
    return [
        Row(
            f"prune: {report.runs:,} of {TOTAL:,} rows, per row",
            report.elapsed / report.runs,
            raw_took / max(1, raw_rows),
            "s",
            status="info",
            note=f"{rate:,.0f} rows/s in {report.batches:,} batches of at most {BATCH:,} "
            f"({report.elapsed:.0f} s), each slot judged and {report.summaries} summaries kept; "
            f"raw: a batched DELETE without judging, {raw_rows / raw_took:,.0f} rows/s",
        ),
        Row(
            "prune: longest lock held (one batch's transaction)",
            report.longest_lock,
            None,
            "s",
            limit=LOCK_LIMIT,
            note=f"median {_q(report.lock_seconds, 0.5)} ms, 99th percentile "
            f"{_q(report.lock_seconds, 0.99)} ms; longest batch with its reads "
            f"{report.longest_batch * 1000:.0f} ms",
        ),
        Row(
            "prune: longest run-path ledger write meanwhile (record + finish)",
            max(waits) if waits else None,
            max(baseline) if baseline else None,
            "s",
            status="info",
            note=f"{len(waits)} attempts recorded and finished on another connection; raw: "
            f"the longest of {len(baseline)} of the same writes just before, without a prune",
        ),
    ]


def _q(values: list[float], q: float) -> str:
    """The `q` quantile of `values` in ms."""
    ordered = sorted(values)
    return f"{ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000:.0f}" if ordered else "-"


if __name__ == "__main__":
    main(run)
