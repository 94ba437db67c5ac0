"""Soak of the redis strategy: the racing fleet of the soak, the lock in Redis, the ledger and the
invoices in PostgreSQL, while the lock key is deleted under its holder (as an expiry or a
Redis restart would) and instances are killed with -9 (their key expires after max_duration).
Every slot is accounted for from the ledger and no invoice is written twice.
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import redis

from tests.faults.fault_helpers import create_invoices, duplicate_invoices, invoices, runs_of
from tests.faults.test_soak import INSTANCES, SLOTS, Fleet, assert_exactly_once, race, tally

REPORT = Path(__file__).with_name("last_soak_redis.txt")


def inject_faults(
    fleet: Fleet, client: redis.Redis, key: str, stop: threading.Event, done: dict[str, int]
) -> None:
    rng = random.Random(2121)  # the fleet is up: every instance said "ready"
    while not stop.wait(rng.uniform(0.4, 1.2)):
        if rng.random() < 0.5:
            if client.delete(key):  # the holder's watchdog finds its value gone: lock_lost
                done["key deleted"] += 1
        else:
            fleet.kill9(f"web-{rng.randrange(INSTANCES)}")
            done["kill -9"] += 1


def test_soak_redis(pg_url, pg_conn, redis_url, uid, tmp_path) -> None:
    job, table = f"billing_{uid}", f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)
    config = tmp_path / "lockconsole.toml"
    config.write_text(
        "\n".join(
            [
                "[lockconsole]",
                'ledger_database = "main"',
                "[databases.main]",
                f"url = {json.dumps(pg_url)}",
                "[databases.cache]",
                f"url = {json.dumps(redis_url)}",
                f"[jobs.{job}]",
                'database = "cache"',
                'strategy = "redis"',
                'schedule = "* * * * *"',
                "watchdog_interval = 0.05",
                'max_duration = "1.5s"',
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    client = redis.Redis.from_url(redis_url)
    started = time.monotonic()
    fleet = Fleet(config, job, table, tmp_path / "t0")
    faults = {"key deleted": 0, "kill -9": 0}
    key = f"job-lock:default:{job}"
    try:
        race(fleet, lambda fleet, stop: inject_faults(fleet, client, key, stop, faults))
    finally:
        client.close()
    elapsed = time.monotonic() - started

    runs = runs_of(config, job)
    rows = invoices(pg_conn, "postgresql", table)
    pg_conn.execute(f"drop table {table}")
    counts, _ = tally(runs, rows)
    dupes = duplicate_invoices(rows)
    text = (
        f"redis soak: {SLOTS} slots x {INSTANCES} instances, {len(runs)} attempts in "
        f"{elapsed:.0f} s; faults: {faults['key deleted']} key deleted, "
        f"{faults['kill -9']} kill -9\n"
        f"exactly-one {counts['exactly-one']}, takeover {counts['takeover']}, double "
        f"{counts['double']}, missed {counts['missed']}, lock_lost {counts['lock_lost']}, "
        f"duplicate invoices {dupes}, accounted {counts['accounted']}/{SLOTS}"
    )
    print("\n" + text)
    REPORT.write_text(text + "\n", encoding="utf-8")
    assert_exactly_once(counts, dupes, faults)
    succeeded = [r for r in runs if r.outcome == "succeeded"]
    assert succeeded and all(r.fencing_token for r in succeeded), "every acquisition has a token"
