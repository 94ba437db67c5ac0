"""Snapshot: `Console.snapshot()` against the plain pg_locks x pg_stat_activity join, raw.

50 sessions hold 100, then 1,000, then 10,000 advisory locks (spread evenly), beside 40 idle
sessions, in the bench database. The console's config has that one PostgreSQL database and one job,
so its snapshot reads holders there plus a small run ledger. The raw side runs the one-query
holders/waiters join of pg_locks and pg_stat_activity (restricted to the current database, as the
console is) through psycopg on a kept connection and fetches every row. Also shown: the inspector's
holders() alone, which is the part of the snapshot that the raw query does.
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

from .common import Row, config, interleave, main, median, pg_url, progress, raw_pg, timed, uid

HOLDING_SESSIONS = 50
IDLE_SESSIONS = 40
LEVELS = (100, 1_000, 10_000)
ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_SNAPSHOT_ROUNDS", 11))
TARGET = 0.5
HEADROOM = 8  # connections left free: ours (raw, console, ledger) and other people's
TAKE_LOCKS = "SELECT count(pg_advisory_lock(k)) FROM generate_series(%s::bigint, %s::bigint) k"
RAW_QUERY = """
SELECT l.pid,
       l.database, d.datname,
       l.objsubid                                   AS keyspace,
       CASE WHEN l.objsubid = 1
            THEN (l.classid::bigint << 32) | l.objid::bigint END AS key,
       CASE WHEN l.objsubid = 2 THEN l.classid::int4 END AS key1,
       CASE WHEN l.objsubid = 2 THEN l.objid::int4  END AS key2,
       l.mode, l.granted, l.waitstart,
       a.usename, a.application_name, a.client_addr, a.backend_start,
       a.xact_start, a.state, a.state_change, a.wait_event_type, a.wait_event,
       a.query,
       CASE WHEN NOT l.granted THEN pg_blocking_pids(l.pid) END AS blocked_by
FROM pg_locks l
LEFT JOIN pg_stat_activity a ON a.pid = l.pid
LEFT JOIN pg_database d ON d.oid = l.database
WHERE l.locktype = 'advisory'
  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY l.database, keyspace, key, key1, key2, l.granted DESC, l.waitstart NULLS FIRST, l.pid
"""


def _parts(console: Any, snap: Any) -> str:
    """Where the rest of a snapshot goes: the ledger read, the sightings (how long each lock
    is held) and mark_stale, timed alone."""
    from lockconsole.console.snapshot.stale import mark_stale

    jobs = list(console.config.jobs.values())
    runs = list(snap.runs)
    ledger = median(
        timed(lambda: console.connections.recent_runs("main", snap.taken_at)) for _ in range(5)
    )
    stale = median(
        timed(
            lambda: mark_stale(
                snap.holders,
                jobs,
                runs,
                now=snap.taken_at,
                idle_threshold=console.settings.idle_threshold,
            )
        )
        for _ in range(5)
    )
    seen = median(_stamp(console, snap) for _ in range(5))
    return (
        f"ledger read {ledger * 1e3:.1f} ms, sightings {seen * 1e3:.1f} ms, "
        f"mark_stale {stale * 1e3:.1f} ms"
    )


def _stamp(console: Any, snap: Any) -> float:
    """Seconds the console's sightings take to fill a read's holders (as read: unfilled)."""
    from lockconsole.model.construct import construct
    from lockconsole.model.views import Holder

    blank = {"held_since": None, "held_from": None, "first_seen": None}
    fresh = [
        construct(Holder, {**h.__dict__, **blank}) if h.held_from == "at_least" else h
        for h in snap.holders
    ]
    return timed(lambda: console.sightings.stamp(fresh, snap.taken_at))


def _idle_budget(wanted: int) -> int:
    """Idle sessions we can open now, leaving headroom in max_connections for everyone else.

    Waits up to 20 s for connections to free up (the contention figure's backends exit a
    little after their clients), then settles for what is free.
    """
    deadline = time.monotonic() + 20
    while True:
        with raw_pg() as conn:
            free = conn.execute(
                "SELECT current_setting('max_connections')::int - count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend'"
            ).fetchone()[0]
        room = free - HOLDING_SESSIONS - HEADROOM
        if room >= wanted or time.monotonic() > deadline:
            return max(0, min(wanted, room))
        time.sleep(1)


def run() -> list[Row]:
    from lockconsole.console.facade import Console

    job = f"bench_snapshot_{uid()}"
    cfg = config(
        f'[databases.main]\nurl = "{pg_url()}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        'schedule = "0 2 * * *"\n'
    )
    base = random.randrange(1 << 40, 1 << 50)  # our keys: nobody else's
    holders: list[Any] = []
    idle: list[Any] = []
    rows: list[Row] = []
    console = Console(cfg, read_only=True)
    raw = raw_pg()
    try:
        idle_count = _idle_budget(IDLE_SESSIONS)
        holders = [raw_pg(application_name=f"bench-holder-{i}") for i in range(HOLDING_SESSIONS)]
        idle = [raw_pg(application_name=f"bench-idle-{i}") for i in range(idle_count)]
        held = 0
        inspector = console.connections.inspector("main", None)
        jobs = list(cfg.jobs.values())
        for level in LEVELS:
            per = level // HOLDING_SESSIONS
            for s, conn in enumerate(holders):
                first = base + s * 1_000_000
                conn.execute(
                    TAKE_LOCKS,
                    (first + held, first + per - 1),
                )
            held = per
            sides = {
                "snapshot": lambda: timed(console.snapshot),
                "raw": lambda: timed(lambda: raw.execute(RAW_QUERY).fetchall()),
                "holders": lambda: timed(lambda: inspector.holders(jobs)),
            }
            snap = console.snapshot()  # warm up (pooler detection, ledger table, caches)
            seen = sum(1 for h in snap.holders if h.key_kind == "int64" and int(h.key) >= base)
            raw_rows = len(raw.execute(RAW_QUERY).fetchall())
            progress(
                f"snapshot: {level} locks ({seen} seen by the console, {raw_rows} raw), "
                f"{ROUNDS} rounds"
            )
            got = {k: median(v) for k, v in interleave(sides, ROUNDS).items()}
            parts = _parts(console, snap)
            target = TARGET if level == LEVELS[-1] else None  # the smaller levels show growth
            rows.append(
                Row(
                    f"snapshot: {level:,} locks",
                    got["snapshot"],
                    got["raw"],
                    "s",
                    target,
                    note=f"holders() alone {got['holders'] * 1e3:.1f} ms "
                    f"({got['holders'] / got['raw']:.2f}x raw), {parts}; the "
                    f"console saw {seen} of our locks, the raw join {raw_rows} "
                    f"rows; {len(idle)} idle sessions",
                )
            )
    finally:
        for conn in holders + idle:
            conn.close()  # session locks die with their sessions
        raw.close()
        console.close()
    return rows


if __name__ == "__main__":
    main(run)
