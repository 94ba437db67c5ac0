"""The link mode: `run_once` against the naive four over a network link of ~1 ms round trip.

On loopback a round trip costs ~40 us and a durable commit 0.3-1.8 ms, so what run_once's merged
statements save (two round trips of four, one for pg-xact) cannot show there. Here both sides go
through one latency-adding proxy (bench/link.py, a process of its own on 127.0.0.1) in front of
the PostgreSQL and the MariaDB server, measured interleaved in the same run:

- lockconsole: `with run_once(job) as run:` on connections kept between attempts;
- raw: the naive four statements of bench/lock_cycle.py (try-lock, ledger INSERT, ledger UPDATE,
  release) on two kept connections, the driver's defaults.

The stated one-way delay is $LOCKCONSOLE_BENCH_LINK_DELAY_MS (default 0.35 ms, about 1 ms round
trip here: the proxy adds its own wake-up time); the figure prints the `SELECT 1` round trip it
measured through the link before the cycles. The proxy shows the server other ports than the
ones dialled, which lockconsole reads as a pooler in between: the jobs set allow_pooler, and
lockconsole's connections are taken as direct (prepared statements, as on a real direct link),
as the raw driver's are.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from .common import Row, config, interleave, main, median, mysql_url, pg_url, progress, uid
from .link import LatencyProxy, select_one, through
from .lock_cycle import STRATEGIES, RawLock, cleanup
from .round_trips import _raw_connections

DELAY_MS = float(os.environ.get("LOCKCONSOLE_BENCH_LINK_DELAY_MS", 0.35))
CYCLES = int(os.environ.get("LOCKCONSOLE_BENCH_LINK_CYCLES", 400))  # run_once cycles per side
BLOCKS = 20
# over the link the round trips saved count: run_once against the naive four
LINK_TARGETS = {"pg-session": 0.75, "pg-xact": 0.85, "mysql": 0.75, "lease": 0.75}


@contextmanager
def taken_as_direct() -> Iterator[None]:
    """lockconsole's connections through the link prepare what they repeat, as a direct one
    does (the proxy's other ports would otherwise keep them unprepared)."""
    from lockconsole.backends import connect
    from lockconsole.backends.lease import lock as lease_lock
    from lockconsole.backends.ledger import store
    from lockconsole.backends.postgres import lock as pg_lock
    from lockconsole.backends.postgres.wire import mark_direct, wire_for

    def direct(conn: Any, server_port: Any, client_port: Any) -> bool:
        if wire_for(conn).direct:
            return False
        mark_direct(conn)
        return True

    modules = (connect, lease_lock, store, pg_lock)
    saved = [m.prepare_if_direct for m in modules]
    for m in modules:
        m.prepare_if_direct = direct  # type: ignore[assignment]
    try:
        yield
    finally:
        for m, fn in zip(modules, saved, strict=True):
            m.prepare_if_direct = fn  # type: ignore[assignment]


def _config(u: str, urls: dict[str, str]) -> Any:
    lines = [f'[databases.pg]\nurl = "{urls["pg"]}"', f'[databases.my]\nurl = "{urls["my"]}"']
    for strategy in STRATEGIES:
        name = f"bench_link_{strategy.replace('-', '_')}_{u}"
        lines += [
            f"[jobs.{name}]",
            f'database = "{"my" if strategy == "mysql" else "pg"}"',
            f'strategy = "{strategy}"',
            'schedule = "*/5 * * * *"',
            "once_per_slot = false",
            "allow_pooler = true",
        ]
        if strategy == "lease":
            lines += [f'lease_table = "bench_shedlock_{u}"', 'max_duration = "1h"']
    return config("\n".join(lines) + "\n")


def _per_cycle(fn: Any, n: int) -> float:
    import time

    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def bench_strategy(cfg: Any, strategy: str, urls: dict[str, str]) -> tuple[float, float]:
    """(lockconsole's run_once cycle, the naive four's), seconds, through the link."""
    from lockconsole import run_once
    from lockconsole.engine.sessions import REGISTRY

    job = next(j for j in cfg.jobs.values() if j.strategy == strategy)
    raw = RawLock(strategy, job)
    raw_lock, raw_ledger = _raw_connections(raw, urls, strategy)

    def lc() -> None:
        with run_once(job.name, config=cfg, instance="bench-link") as run:
            assert run.acquired, run.run.message

    per_block = max(1, CYCLES // BLOCKS)
    sides = {
        "lockconsole": lambda: _per_cycle(lc, per_block),
        "raw": lambda: _per_cycle(lambda: raw.full_cycle(raw_lock, raw_ledger), per_block),
    }
    try:
        for fn in sides.values():  # warm up: connections, tables, prepared statements
            fn()
        progress(f"link {strategy}: {CYCLES} run_once cycles per side")
        samples = interleave(sides, BLOCKS)
    finally:
        raw_lock.close()
        raw_ledger.close()
        REGISTRY.close_all()
    return median(samples["lockconsole"]), median(samples["raw"])


def run() -> list[Row]:
    u = uid()
    pg_port = urlsplit(pg_url()).port or 5432
    my_port = urlsplit(mysql_url()).port or 3306
    rows: list[Row] = []
    cfg = None
    with LatencyProxy(pg_port, DELAY_MS) as pg_link, LatencyProxy(my_port, DELAY_MS) as my_link:
        urls = {"pg": through(pg_url(), pg_link.port), "my": through(mysql_url(), my_link.port)}
        rtt = select_one(urls["pg"])
        progress(f"link: one-way delay {DELAY_MS} ms, SELECT 1 round trip {rtt * 1e3:.2f} ms")
        cfg = _config(u, urls)
        link = f"one-way {DELAY_MS:g} ms, SELECT 1 round trip {rtt * 1e3:.2f} ms"
        rows.append(Row(f"link: SELECT 1 round trip ({link})", rtt, None, "s", status="info"))
        try:
            with taken_as_direct():
                for strategy in STRATEGIES:
                    lc, raw = bench_strategy(cfg, strategy, urls)
                    rows.append(
                        Row(
                            f"link ({rtt * 1e3:.2f} ms): run_once vs the naive four: {strategy}",
                            lc,
                            raw,
                            "s",
                            LINK_TARGETS[strategy],
                        )
                    )
        finally:
            cleanup(cfg, u)
    return rows


if __name__ == "__main__":
    main(run)
