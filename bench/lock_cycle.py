"""Lock cycle: acquire + release, per strategy (pg-session, pg-xact, mysql, lease on PostgreSQL).

Three figures per strategy, each against the raw driver doing the same SQL in the same run:

- `engine`: lockconsole's Lock object (backends.open_lock) acquiring and releasing 5,000
  times on its one kept connection, against the same statements through the raw driver on one
  connection (driver defaults). This is the engine's floor: one round trip per call, and
  pg-xact pipelines BEGIN with the try-lock. The note also gives the ratio against a raw
  connection opened like lockconsole's (prepare_threshold=None, no server-side prepares).
- `run_once`: the full `with run_once(job) as run:` cycle against the same raw floor. As
  written, run_once opens a lock connection and a ledger connection per attempt, inserts the
  attempt, starts and stops a watchdog thread, updates the attempt and closes both.
- `run_once/raw same work`: run_once against the raw driver doing that same work per cycle
  (two connects, the lock statements, the ledger INSERT and UPDATE, two closes), which shows
  how much of run_once's cost is its own.

The jobs use once_per_slot = false so thousands of cycles can share a slot (when it is on, a
scheduled attempt adds one SELECT of the slot's claims).
"""

from __future__ import annotations

import os
import socket
import time
from datetime import UTC, datetime
from typing import Any

from .common import (
    Row,
    config,
    interleave,
    main,
    median,
    mysql_url,
    pg_url,
    progress,
    raw_mysql,
    raw_pg,
    uid,
)

CYCLES = int(os.environ.get("LOCKCONSOLE_BENCH_CYCLES", 5000))  # engine cycles per side
BLOCKS = 10  # interleaved blocks per side
FULL_CYCLES = int(os.environ.get("LOCKCONSOLE_BENCH_FULL_CYCLES", 200))  # run_once cycles per side
TARGET = 1.10
STRATEGIES = ("pg-session", "pg-xact", "mysql", "lease")

PG_TRY = "SELECT pg_try_advisory_lock(%(key)s::bigint), pg_backend_pid()"
PG_UNLOCK = "SELECT pg_advisory_unlock(%(key)s::bigint)"
PG_TRY_XACT = "SELECT pg_try_advisory_xact_lock(%(key)s::bigint), pg_backend_pid()"
MY_GET = "SELECT GET_LOCK(%(name)s, 0), CONNECTION_ID()"
MY_RELEASE = "SELECT RELEASE_LOCK(%(name)s)"
LEASE_TAKE = """INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token)
VALUES (%(name)s, timezone('utc', CURRENT_TIMESTAMP) + interval '1 hour',
        timezone('utc', CURRENT_TIMESTAMP), %(owner)s, 1)
ON CONFLICT (name) DO UPDATE SET lock_until = excluded.lock_until,
    locked_at = excluded.locked_at, locked_by = excluded.locked_by,
    fencing_token = coalesce({t}.fencing_token, 0) + 1
WHERE {t}.lock_until <= timezone('utc', CURRENT_TIMESTAMP)
RETURNING fencing_token"""
LEASE_GIVE_BACK = """UPDATE {t} SET lock_until = CASE
    WHEN locked_at + interval '0' > timezone('utc', CURRENT_TIMESTAMP) THEN locked_at
    ELSE timezone('utc', CURRENT_TIMESTAMP) END
WHERE name = %(name)s AND locked_by = %(owner)s AND fencing_token = %(token)s"""
COLUMNS = ("job, slot, instance, host, pid, {q}trigger{q}, outcome, started_at, finished_at, "
           "exit_code, message, fencing_token, session_id, strategy, lock_key")  # fmt: skip
VALUES = ", ".join(f"%({c.strip().strip(chr(34))})s" for c in COLUMNS.format(q="").split(","))
INSERT_PG = (
    f"INSERT INTO lockconsole_runs ({COLUMNS.format(q=chr(34))}) VALUES ({VALUES}) RETURNING id"
)
INSERT_MY = f"INSERT INTO lockconsole_runs ({COLUMNS.format(q='`')}) VALUES ({VALUES})"
FINISH = ("UPDATE lockconsole_runs SET outcome = %(outcome)s, finished_at = %(finished_at)s, "
          "exit_code = %(exit_code)s, message = %(message)s WHERE id = %(id)s")  # fmt: skip


class RawLock:
    """One strategy's statements through the raw driver (psycopg or PyMySQL)."""

    def __init__(self, strategy: str, job: Any) -> None:
        self.strategy, self.job = strategy, job
        self.mysql = strategy == "mysql"
        self.params: dict[str, Any] = {"key": job.key.value, "name": str(job.key.value)}
        self.table = job.lease_table
        self.owner = "bench-raw"

    def connect(self, **kwargs: Any) -> Any:
        return raw_mysql() if self.mysql else raw_pg(**kwargs)

    def acquire(self, conn: Any) -> bool:
        if self.strategy == "pg-session":
            return conn.execute(PG_TRY, self.params).fetchone()[0]
        if self.strategy == "pg-xact":
            with conn.pipeline():
                conn.execute("BEGIN")
                cur = conn.execute(PG_TRY_XACT, self.params)
            return cur.fetchone()[0]
        if self.mysql:
            with conn.cursor() as cur:
                cur.execute(MY_GET, self.params)
                return cur.fetchone()[0] == 1
        params = {"name": self.params["name"] + "-raw", "owner": self.owner}
        row = conn.execute(LEASE_TAKE.format(t=self.table), params).fetchone()
        self.params["token"] = row[0] if row else None
        return row is not None

    def release(self, conn: Any) -> None:
        if self.strategy == "pg-session":
            conn.execute(PG_UNLOCK, self.params).fetchone()
        elif self.strategy == "pg-xact":
            conn.execute("COMMIT")
        elif self.mysql:
            with conn.cursor() as cur:
                cur.execute(MY_RELEASE, self.params)
                cur.fetchone()
        else:
            params = {"name": self.params["name"] + "-raw", "owner": self.owner,
                      "token": self.params["token"]}  # fmt: skip
            conn.execute(LEASE_GIVE_BACK.format(t=self.table), params)

    # the same work as one run_once cycle, raw: connects, lock, ledger INSERT/UPDATE, closes

    def full_cycle(self, spent: dict[str, float]) -> None:
        t0 = time.perf_counter()
        lock = self.connect(application_name="bench-raw") if not self.mysql else self.connect()
        t1 = time.perf_counter()
        assert self.acquire(lock)
        t2 = time.perf_counter()
        ledger = self.connect()
        t3 = time.perf_counter()
        now = datetime.now(UTC)
        row = {
            "job": self.job.name, "slot": now.replace(second=0, microsecond=0),
            "instance": "bench-raw", "host": socket.gethostname(), "pid": os.getpid(),
            "trigger": "scheduled", "outcome": "acquired", "started_at": now,
            "finished_at": None, "exit_code": None, "message": None,
            "fencing_token": self.params.get("token"), "session_id": 1,
            "strategy": self.strategy, "lock_key": str(self.job.key),
        }  # fmt: skip
        done = {"outcome": "succeeded", "finished_at": datetime.now(UTC), "exit_code": 0,
                "message": None}  # fmt: skip
        if self.mysql:
            for k in ("slot", "started_at"):
                row[k] = row[k].replace(tzinfo=None)
            done["finished_at"] = done["finished_at"].replace(tzinfo=None)
            with ledger.cursor() as cur:
                cur.execute(INSERT_MY, row)
                done["id"] = cur.lastrowid
        else:
            done["id"] = ledger.execute(INSERT_PG, row).fetchone()[0]
        t4 = time.perf_counter()
        self.release(lock)
        lock.close()
        t5 = time.perf_counter()
        if self.mysql:
            with ledger.cursor() as cur:
                cur.execute(FINISH, done)
        else:
            ledger.execute(FINISH, done)
        ledger.close()
        t6 = time.perf_counter()
        spent["connect"] = spent.get("connect", 0.0) + (t1 - t0) + (t3 - t2)
        spent["ledger"] = spent.get("ledger", 0.0) + (t4 - t3) + (t6 - t5)


def _config(u: str) -> Any:
    lines = [
        "[databases.pg]", f'url = "{pg_url()}"', "[databases.my]", f'url = "{mysql_url()}"',
    ]  # fmt: skip
    for strategy in STRATEGIES:
        name = f"bench_{strategy.replace('-', '_')}_{u}"
        lines += [f"[jobs.{name}]", f'database = "{"my" if strategy == "mysql" else "pg"}"',
                  f'strategy = "{strategy}"', 'schedule = "*/5 * * * *"',
                  "once_per_slot = false"]  # fmt: skip
        if strategy == "lease":
            lines += [f'lease_table = "bench_shedlock_{u}"', 'max_duration = "1h"']
    return config("\n".join(lines) + "\n")


def _per_cycle(fn: Any, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n


def bench_strategy(cfg: Any, strategy: str) -> list[Row]:
    from lockconsole import run_once
    from lockconsole.backends import open_lock

    job = next(j for j in cfg.jobs.values() if j.strategy == strategy)
    raw = RawLock(strategy, job)
    lock = open_lock(job, cfg.database_for(job), instance="bench", application_name="bench")
    conn = raw.connect()
    conn_np = None if raw.mysql else raw.connect(prepare_threshold=None)

    def lc_cycle() -> None:
        lock.acquire()
        lock.release()

    def raw_cycle(c: Any) -> Any:
        def cycle() -> None:
            raw.acquire(c)
            raw.release(c)

        return cycle

    per_block = max(1, CYCLES // BLOCKS)
    sides = {
        "lockconsole": lambda: _per_cycle(lc_cycle, per_block),
        "raw": lambda: _per_cycle(raw_cycle(conn), per_block),
    }
    if conn_np is not None:
        sides["raw_noprep"] = lambda: _per_cycle(raw_cycle(conn_np), per_block)
    for fn in sides.values():  # warm up: table checks, statement preparation, caches
        fn()
    progress(f"lock cycle {strategy}: {CYCLES} engine cycles per side")
    engine = {k: median(v) for k, v in interleave(sides, BLOCKS).items()}
    lock.close()
    conn.close()
    if conn_np is not None:
        conn_np.close()

    progress(f"lock cycle {strategy}: {FULL_CYCLES} run_once cycles per side")

    def full_lc() -> None:
        with run_once(job.name, config=cfg, instance="bench") as run:
            assert run.acquired, run.run.message

    spent: dict[str, float] = {}
    full_block = max(1, FULL_CYCLES // BLOCKS)
    full_sides = {
        "lockconsole": lambda: _per_cycle(full_lc, full_block),
        "raw": lambda: _per_cycle(lambda: raw.full_cycle(spent), full_block),
    }
    for fn in full_sides.values():
        fn()
    spent.clear()
    full = {k: median(v) for k, v in interleave(full_sides, BLOCKS).items()}
    raw_cycles = full_block * BLOCKS
    connect_ms = spent["connect"] / raw_cycles * 1e3
    ledger_ms = spent["ledger"] / raw_cycles * 1e3

    notes = {}
    if "raw_noprep" in engine:
        notes["engine"] = (
            f"vs a raw connection opened like lockconsole's (prepare_threshold=None): "
            f"{engine['lockconsole'] / engine['raw_noprep']:.2f}x"
        )
    floor = engine["raw"]
    share = (connect_ms + ledger_ms) / (full["lockconsole"] * 1e3)
    notes["run_once"] = (
        f"{full['lockconsole'] / floor:.0f}x the floor: per attempt two connects "
        f"({connect_ms:.2f} ms raw) and the ledger INSERT + UPDATE ({ledger_ms:.2f} ms raw) are "
        f"{share:.0%} of run_once's {full['lockconsole'] * 1e3:.2f} ms"
    )
    notes["same_work"] = "raw: the same connects, lock SQL and ledger SQL per cycle"
    tag = f"lock cycle {strategy}"
    return [
        Row(f"{tag}: engine", engine["lockconsole"], floor, "s", TARGET,
            note=notes.get("engine", "")),
        Row(f"{tag}: run_once", full["lockconsole"], floor, "s", TARGET, note=notes["run_once"]),
        Row(f"{tag}: run_once/raw same work", full["lockconsole"], full["raw"], "s", TARGET,
            note=notes["same_work"] if strategy == "pg-session" else ""),
    ]  # fmt: skip


def cleanup(cfg: Any, u: str) -> None:
    import psycopg
    import pymysql

    jobs = [j.name for j in cfg.jobs.values()]
    with raw_pg() as conn:
        conn.execute(f"DROP TABLE IF EXISTS bench_shedlock_{u}")  # our own table, named per run
        try:
            conn.execute("DELETE FROM lockconsole_runs WHERE job = ANY(%s)", (jobs,))
        except psycopg.errors.UndefinedTable:
            pass
    my = raw_mysql()
    try:
        with my.cursor() as cur:
            cur.execute("DELETE FROM lockconsole_runs WHERE job IN %s", (jobs,))
    except pymysql.err.ProgrammingError:  # no ledger table: nothing was recorded
        pass
    finally:
        my.close()


def run() -> list[Row]:
    u = uid()
    cfg = _config(u)
    rows: list[Row] = []
    try:
        for strategy in STRATEGIES:
            rows += bench_strategy(cfg, strategy)
    finally:
        cleanup(cfg, u)
    return rows


if __name__ == "__main__":
    main(run)
