"""Round trips per attempt, counted on the wire, per strategy.

Every connection goes through a counting TCP proxy (bench/wire.py): a round trip is a burst the
client sends after the server last spoke, so a pipeline of statements is one. lockconsole's side
is a `run_once` attempt that acquires, checks its slot's claim, runs an empty body and records
its outcome, on connections kept between attempts (connecting is not counted); the raw side is
the naive four statements (try-lock, ledger INSERT, ledger UPDATE, release) through the same
proxy. The jobs set allow_pooler (the proxy shows other ports than the server's, which the
pooler guard would otherwise refuse for pg-session).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from .common import Row, config, main, mysql_url, pg_url, progress, uid
from .lock_cycle import RawLock
from .wire import CountingProxy

ATTEMPTS = int(os.environ.get("LOCKCONSOLE_BENCH_RT_ATTEMPTS", 20))
WARM = 10  # attempts before counting: connects, table checks, prepared statements
STRATEGIES = ("pg-session", "pg-xact", "mysql", "lease", "redis")


def _through(url: str, proxy: CountingProxy) -> str:
    parts = urlsplit(url)
    auth = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{auth}127.0.0.1:{proxy.port}"))


def _proxy(url: str, default_port: int) -> CountingProxy:
    parts = urlsplit(url)
    return CountingProxy((parts.hostname or "127.0.0.1", parts.port or default_port))


def _redis_url() -> str:
    from .redis_cycle import redis_url

    return redis_url()


def _config(u: str, urls: dict[str, str], strategy: str) -> Any:
    name = f"bench_rt_{strategy.replace('-', '_')}_{u}"
    lines = [f'[databases.pg]\nurl = "{urls["pg"]}"', f'[databases.my]\nurl = "{urls["my"]}"']
    if strategy == "redis":
        lines = ['[lockconsole]\nledger_database = "pg"', *lines]
        lines.append(f'[databases.cache]\nurl = "{urls["redis"]}"')
    database = {"mysql": "my", "redis": "cache"}.get(strategy, "pg")
    lines += [
        f"[jobs.{name}]",
        f'database = "{database}"',
        f'strategy = "{strategy}"',
        'schedule = "*/5 * * * *"',
        "allow_pooler = true",
    ]
    if strategy == "lease":
        lines += [f'lease_table = "bench_rt_shedlock_{u}"', 'max_duration = "1h"']
    if strategy == "redis":
        lines.append(f'redis_prefix = "bench-rt-{u}:"')
    return config("\n".join(lines) + "\n"), name


def _count(proxies: list[CountingProxy], fn: Any, n: int) -> float:
    before = sum(p.turns for p in proxies)
    for i in range(n):
        fn(i)
    return (sum(p.turns for p in proxies) - before) / n


def measure(strategy: str, u: str) -> tuple[float, float | None]:
    """(lockconsole's round trips per attempt, the naive four's) for one strategy."""
    from lockconsole import run_once
    from lockconsole.engine.sessions import REGISTRY

    proxies = {
        "pg": _proxy(pg_url(), 5432),
        "my": _proxy(mysql_url(), 3306),
        "redis": _proxy(_redis_url(), 6379),
    }
    try:
        urls = {
            "pg": _through(pg_url(), proxies["pg"]),
            "my": _through(mysql_url(), proxies["my"]),
            "redis": _through(_redis_url(), proxies["redis"]),
        }
        cfg, name = _config(u, urls, strategy)
        base = datetime(2031, 1, 1, tzinfo=UTC)

        def attempt(i: int) -> None:
            slot = base + timedelta(minutes=5 * i)  # a slot each: the claim is checked, and free
            with run_once(name, config=cfg, instance="bench-rt", slot=slot) as run:
                assert run.acquired, run.run.message

        for i in range(WARM):  # connects, creates the tables, passes the pooler guard
            attempt(10_000 + i)
        lc = _count(list(proxies.values()), attempt, ATTEMPTS)
        REGISTRY.close_all()
        raw_side = None
        if strategy != "redis":
            raw = RawLock(strategy, cfg.job(name))
            lock_conn, ledger_conn = _raw_connections(raw, urls, strategy)
            try:
                for _ in range(WARM):  # the driver prepares what it repeats, once
                    raw.full_cycle(lock_conn, ledger_conn, check=False)
                raw_side = _count(
                    list(proxies.values()),
                    lambda _i: raw.full_cycle(lock_conn, ledger_conn, check=False),
                    ATTEMPTS,
                )
            finally:
                lock_conn.close()
                ledger_conn.close()
        return lc, raw_side
    finally:
        for proxy in proxies.values():
            proxy.close()


def _raw_connections(raw: Any, urls: dict[str, str], strategy: str) -> tuple[Any, Any]:
    if strategy == "mysql":
        import pymysql

        u = urlsplit(urls["my"])

        def connect() -> Any:
            return pymysql.connect(
                host=u.hostname,
                port=u.port,
                user=u.username or "root",
                password=u.password or "",
                database=u.path.lstrip("/"),
                autocommit=True,
            )

        return connect(), connect()
    import psycopg

    return (
        psycopg.connect(urls["pg"], autocommit=True),
        psycopg.connect(urls["pg"], autocommit=True),
    )


def cleanup(u: str) -> None:
    from .common import raw_mysql, raw_pg

    with raw_pg() as conn:
        conn.execute(f"DROP TABLE IF EXISTS bench_rt_shedlock_{u}")
        conn.execute("DELETE FROM lockconsole_runs WHERE job LIKE %s", (f"bench_rt_%_{u}",))
    my = raw_mysql()
    try:
        with my.cursor() as cur:
            cur.execute("DELETE FROM lockconsole_runs WHERE job LIKE %s", (f"bench_rt_%_{u}",))
    finally:
        my.close()


def run() -> list[Row]:
    u = uid()
    rows = []
    try:
        for strategy in STRATEGIES:
            progress(f"round trips: {ATTEMPTS} attempts of {strategy}, counted on the wire")
            lc, raw = measure(strategy, u)
            note = "raw: the naive four statements" if raw is not None else "no raw side"
            if strategy == "redis":
                note = "lock in Redis, ledger in PostgreSQL (counted on both)"
            rows.append(
                Row(
                    f"round trips per attempt: {strategy}",
                    lc,
                    raw,
                    "round trips",
                    status="info",
                    note=note,
                )
            )
    finally:
        cleanup(u)
    return rows


if __name__ == "__main__":
    main(run)
