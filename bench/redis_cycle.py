"""Redis lock cycle: lockconsole's RedisLock acquire + release against raw redis-py.

Both sides use one kept client on the same Redis (interleaved in the same run, 5,000 cycles a
side): the raw side makes ShedLock's value (time, host, UUID) and sends ShedLock's commands,
`SET key value NX PX <ms>` and the compare-and-delete script (EVALSHA); lockconsole's acquire
is one script that also INCRs the fencing counter and notes the token, and its release is the
compare-and-delete. Redis is
$LOCKCONSOLE_BENCH_REDIS_URL, else $LOCKCONSOLE_TEST_REDIS_URL, else redis://127.0.0.1:6379/0
(only keys under a unique prefix are written, and deleted at the end).
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from .common import Row, interleave, main, median, progress, uid

CYCLES = int(os.environ.get("LOCKCONSOLE_BENCH_CYCLES", 5000))
BLOCKS = 50
TARGET = 1.10
MS = 3_600_000
HOST = socket.gethostname()


def redis_url() -> str:
    env = os.environ
    found = env.get("LOCKCONSOLE_BENCH_REDIS_URL") or env.get("LOCKCONSOLE_TEST_REDIS_URL")
    return found or "redis://127.0.0.1:6379/0"


def _per_cycle(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def run() -> list[Row]:
    import redis

    from lockconsole.backends.redis.lock import RELEASE, RedisLock
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database, Job, LockKey

    url, u = redis_url(), uid()
    prefix = f"lockconsole-bench:{u}:"
    db = Database("cache", parse_url(url))
    job = Job(
        "bench",
        "cache",
        "redis",
        LockKey("name", "cycle"),
        max_duration=timedelta(milliseconds=MS),
        redis_prefix=prefix,
    )
    lock = RedisLock(job, db, owner="bench")
    raw = redis.Redis.from_url(url)
    release = raw.register_script(RELEASE)
    raw_key, note = f"{prefix}raw".encode(), f"{prefix}raw-note".encode()

    def lc_cycle() -> None:
        assert lock.acquire()
        lock.release()

    def raw_cycle() -> None:
        stamp = datetime.now(UTC).isoformat(timespec="milliseconds")[:-6]  # ShedLock's value
        value = f"ADDED:{stamp}Z@{HOST}:{uuid.uuid4()}".encode()
        assert raw.set(raw_key, value, nx=True, px=MS)
        release(keys=[raw_key, note], args=[value])

    per_block = max(1, CYCLES // BLOCKS)
    sides = {
        "lockconsole": lambda: _per_cycle(lc_cycle, per_block),
        "raw": lambda: _per_cycle(raw_cycle, per_block),
    }
    try:
        for fn in sides.values():  # warm up: script loading, connections
            fn()
        progress(f"redis lock cycle: {CYCLES} cycles per side on {db.url.masked}")
        got = {k: median(v) for k, v in interleave(sides, BLOCKS).items()}
    finally:
        lock.close()
        for key in raw.scan_iter(match=f"{prefix}*".encode()):
            raw.delete(key)
        for key in raw.scan_iter(match=f"lockconsole:*{prefix}*".encode()):
            raw.delete(key)
        raw.close()
    note_text = "acquire (SET NX PX + fencing INCR, one script) + compare-and-delete"
    return [
        Row(
            "lock cycle redis",
            got["lockconsole"] * 1e3,
            got["raw"] * 1e3,
            "ms",
            target=TARGET,
            note=note_text,
        )
    ]


if __name__ == "__main__":
    main(run)
