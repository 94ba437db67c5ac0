"""Lock cycle: acquire + release, per strategy (pg-session, pg-xact, mysql, lease on PostgreSQL).

Each figure is against the raw driver (psycopg or PyMySQL, driver defaults) doing the same SQL
on kept connections, measured interleaved in the same run, 5,000 cycles a side:

- `engine`: lockconsole's Lock object (backends.open_lock) acquiring and releasing on its one
  kept connection, against the lock statements alone on one raw connection. The floor is one
  round trip per call; pg-xact pipelines BEGIN with the try-lock. The note sets it beside a raw
  connection without prepared statements, measured as a separate pair (interleaving three
  sides made whichever side followed the unprepared one look slower on this machine).
- `run_once vs the naive four`: the whole `with run_once(job) as run:` cycle, as an app calls
  it again and again (the lock and ledger connections are kept between attempts), against the
  raw driver sending the naive four statements: the try-lock, the ledger INSERT of the attempt,
  the ledger UPDATE of its outcome, the release (four round trips, two of them commits). The
  raw side writes the ledger on a second connection: the attempt's row must commit on its own
  (inside a pg-xact lock's transaction it would stay invisible until the job ends). lockconsole
  does more (the slot's claim, the lock's last check, the conditional outcome) in fewer round
  trips: see `python -m bench round_trips`.
- `run_once's merged statements alone vs the naive four` (info, pg-session): the statements
  run_once sends, replayed alone through its libpq pipeline (MergedStatements): the merging's
  own gain, apart from lockconsole's Python work.
- `run_once, ledger_commit = async, vs the naive four`: the same cycle for the job's twin whose
  outcome does not wait for the WAL flush (pg-session, pg-xact, lease).
- `lockconsole's own CPU per attempt`: the process's user + sys time per run_once cycle minus
  the naive four's, over the same interleaved blocks (CPU time moves less than wall time on a
  shared machine): what lockconsole's Python, threads and statements cost beyond the raw driver.
- `run_once vs lock SQL only` (info): the same cycle against the bare lock statements, to show
  what recording every attempt costs (two durable commits).

The jobs use once_per_slot = false so thousands of cycles can share a slot (when it is on, the
slot's claim is read in the same statement that records the attempt, where that is merged).
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
BLOCKS = 50  # interleaved blocks per side (short blocks: bursts of noise hit both sides)
FULL_CYCLES = int(os.environ.get("LOCKCONSOLE_BENCH_FULL_CYCLES", 5000))  # run_once cycles per side
TARGET = 1.10
# run_once against the naive four statements on loopback, where a round trip costs ~40 us and
# a durable commit up to ms: what the merged statements save shows over a link (link_cycle.py)
FULL_TARGETS = {"pg-session": 1.2, "pg-xact": 1.2, "mysql": 1.2, "lease": 1.2}
OWN_CPU_LIMIT = 0.2e-3  # seconds of lockconsole's own CPU per attempt, beyond the naive four's
HOST = socket.gethostname()
STRATEGIES = ("pg-session", "pg-xact", "mysql", "lease")
ASYNC_STRATEGIES = ("pg-session", "pg-xact", "lease")  # where ledger_commit = "async" applies

PG_TRY = "SELECT pg_try_advisory_lock(%(key)s::bigint), pg_backend_pid()"
PG_UNLOCK = "SELECT pg_advisory_unlock(%(key)s::bigint)"
PG_TRY_XACT = "SELECT pg_try_advisory_xact_lock(%(key)s::bigint), pg_backend_pid()"
MY_GET = "SELECT GET_LOCK(%(name)s, 0), CONNECTION_ID()"
MY_RELEASE = "SELECT RELEASE_LOCK(%(name)s)"
MY_CHECK = "SELECT IS_USED_LOCK(%(name)s) = CONNECTION_ID()"
LEASE_CHECK = (
    "SELECT name FROM {t} WHERE name = %(name)s AND locked_by = %(owner)s "
    "AND fencing_token = %(token)s "
    "AND lock_until > timezone('utc', CURRENT_TIMESTAMP)"
)
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
COLUMNS = (
    "job, slot, instance, host, pid, {q}trigger{q}, outcome, started_at, finished_at, "
    "exit_code, message, fencing_token, session_id, strategy, lock_key"
)
VALUES = ", ".join(f"%({c.strip().strip(chr(34))})s" for c in COLUMNS.format(q="").split(","))
INSERT_PG = (
    f"INSERT INTO lockconsole_runs ({COLUMNS.format(q=chr(34))}) VALUES ({VALUES}) RETURNING id"
)
INSERT_MY = f"INSERT INTO lockconsole_runs ({COLUMNS.format(q='`')}) VALUES ({VALUES})"
FINISH = (
    "UPDATE lockconsole_runs SET outcome = %(outcome)s, finished_at = %(finished_at)s, "
    "exit_code = %(exit_code)s, message = %(message)s WHERE id = %(id)s"
)


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
            params = {
                "name": self.params["name"] + "-raw",
                "owner": self.owner,
                "token": self.params["token"],
            }
            conn.execute(LEASE_GIVE_BACK.format(t=self.table), params)

    def check(self, conn: Any) -> None:
        """The lock's last check after the job, before its outcome is written."""
        if self.mysql:
            with conn.cursor() as cur:
                cur.execute(MY_CHECK, self.params)
                cur.fetchone()
        elif self.strategy == "lease":
            params = {
                "name": self.params["name"] + "-raw",
                "owner": self.owner,
                "token": self.params["token"],
            }
            conn.execute(LEASE_CHECK.format(t=self.table), params).fetchone()
        else:
            from lockconsole.backends import sqlfiles
            from lockconsole.model.keys import pg_locks_identity

            ident = dict(
                zip(("classid", "objid", "objsubid"), pg_locks_identity(self.job.key), strict=True)
            )
            conn.execute(sqlfiles.load("check_advisory_lock"), ident).fetchone()

    # the statements of one run_once cycle: lock, ledger INSERT, check, ledger UPDATE, release

    def ledger_row(self) -> dict[str, Any]:
        now = datetime.now(UTC)
        row = {
            "job": self.job.name,
            "slot": now.replace(second=0, microsecond=0),
            "instance": "bench-raw",
            "host": HOST,
            "pid": os.getpid(),
            "trigger": "scheduled",
            "outcome": "acquired",
            "started_at": now,
            "finished_at": None,
            "exit_code": None,
            "message": None,
            "fencing_token": self.params.get("token"),
            "session_id": 1,
            "strategy": self.strategy,
            "lock_key": str(self.job.key),
        }
        if self.mysql:
            for k in ("slot", "started_at"):
                row[k] = row[k].replace(tzinfo=None)
        return row

    def full_cycle(self, lock: Any, ledger: Any, *, check: bool = False) -> None:
        """The naive four statements: try-lock, ledger INSERT, ledger UPDATE, release (and,
        with `check`, the lock's last check before the UPDATE)."""
        assert self.acquire(lock)
        row = self.ledger_row()
        if self.mysql:
            with ledger.cursor() as cur:
                cur.execute(INSERT_MY, row)
                run_id = cur.lastrowid
        else:
            run_id = ledger.execute(INSERT_PG, row).fetchone()[0]
        if check:
            self.check(lock)
        finished = datetime.now(UTC)
        if self.mysql:
            finished = finished.replace(tzinfo=None)
        done = {
            "outcome": "succeeded",
            "exit_code": 0,
            "message": None,
            "id": run_id,
            "finished_at": finished,
        }
        if self.mysql:
            with ledger.cursor() as cur:
                cur.execute(FINISH, done)
        else:
            ledger.execute(FINISH, done)
        self.release(lock)


class MergedStatements:
    """run_once's own statements for pg-session, replayed alone: the try-lock and `decide_run`
    in one pipeline, then `finish_release_run`, exactly as an attempt on a kept connection sent
    them (its SQL and parameters captured once) and sent the way it sends them (its libpq
    pipeline, backends/postgres/wire.py). What the two merged round trips cost with none of
    the engine's Python around them, on one kept connection that prepares them as a kept
    lockconsole connection does."""

    def __init__(self, cfg: Any, job: Any) -> None:
        from lockconsole import run_once
        from lockconsole.backends.connect import PREPARE_THRESHOLD
        from lockconsole.backends.postgres import wire

        sent: list[tuple[str, dict[str, Any]]] = []
        exchange = wire.Wire.exchange

        def capture(self: Any, statements: Any) -> Any:
            sent.extend((sql, dict(params)) for sql, params in statements)
            return exchange(self, statements)

        def attempt() -> None:
            with run_once(job.name, config=cfg, instance="bench-merged"):
                pass

        attempt()  # a kept connection from here on: the plain try-lock, as in the loop
        wire.Wire.exchange = capture  # type: ignore[method-assign]
        try:
            attempt()
        finally:
            wire.Wire.exchange = exchange  # type: ignore[method-assign]
        (self.tried, self.decide, self.finish) = sent  # the three statements of one attempt
        self.conn = raw_pg(prepare_threshold=PREPARE_THRESHOLD)
        self.wire = wire.wire_for(self.conn)

    def cycle(self) -> None:
        answer = self.wire.exchange([self.tried, self.decide])
        row = answer.row(1)
        assert answer.error is None and row is not None and row[0] == "acquired", answer.error
        self.finish[1]["id"] = row[1]
        done = self.wire.exchange([self.finish]).row(0)
        assert done is not None and done[0] and done[1] == "succeeded" and done[2], done

    def close(self) -> None:
        self.conn.close()


def _config(u: str) -> Any:
    lines = [
        "[databases.pg]",
        f'url = "{pg_url()}"',
        "[databases.my]",
        f'url = "{mysql_url()}"',
    ]
    for strategy in STRATEGIES:
        name = f"bench_{strategy.replace('-', '_')}_{u}"
        job = [
            f'database = "{"my" if strategy == "mysql" else "pg"}"',
            f'strategy = "{strategy}"',
            'schedule = "*/5 * * * *"',
            "once_per_slot = false",
        ]
        if strategy == "lease":
            job += [f'lease_table = "bench_shedlock_{u}"', 'max_duration = "1h"']
        lines += [f"[jobs.{name}]", *job]
        if strategy in ASYNC_STRATEGIES:  # the same job, its outcome not waiting for the flush
            lines += [f"[jobs.{name}_async]", *job, 'ledger_commit = "async"']
    return config("\n".join(lines) + "\n")


def _per_cycle(fn: Any, n: int, cpu: list[float] | None = None) -> float:
    """Seconds per call of `fn` over `n` calls; with `cpu`, the process's CPU time per call
    (user + sys, every thread) appended to it."""
    start, used = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn()
    if cpu is not None:
        cpu.append((time.process_time() - used) / n)
    return (time.perf_counter() - start) / n


def bench_strategy(cfg: Any, strategy: str) -> list[Row]:
    from lockconsole import run_once
    from lockconsole.backends.factory import open_lock

    job = next(
        j for j in cfg.jobs.values() if j.strategy == strategy and j.ledger_commit == "durable"
    )
    async_job = cfg.jobs.get(job.name + "_async")
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
    lc_side = lambda: _per_cycle(lc_cycle, per_block)  # noqa: E731
    sides = {"lockconsole": lc_side, "raw": lambda: _per_cycle(raw_cycle(conn), per_block)}
    for fn in sides.values():  # warm up: table checks, statement preparation, caches
        fn()
    progress(f"lock cycle {strategy}: {CYCLES} engine cycles per side")
    engine = {k: median(v) for k, v in interleave(sides, BLOCKS).items()}
    if conn_np is not None:  # for the note, in a pair of its own: a third side skews the others
        np_side = lambda: _per_cycle(raw_cycle(conn_np), per_block)  # noqa: E731
        np_side()
        pair = interleave({"lockconsole": lc_side, "raw_noprep": np_side}, BLOCKS // 2)
        engine["noprep_ratio"] = median(pair["lockconsole"]) / median(pair["raw_noprep"])
    lock.close()
    conn.close()
    if conn_np is not None:
        conn_np.close()

    progress(f"lock cycle {strategy}: {FULL_CYCLES} run_once cycles per side")

    def full_lc(name: str) -> Any:
        def cycle() -> None:
            with run_once(name, config=cfg, instance="bench") as run:
                assert run.acquired, run.run.message

        return cycle

    raw_lock, raw_ledger = raw.connect(), raw.connect()
    full_block = max(1, FULL_CYCLES // BLOCKS)
    cpu: dict[str, list[float]] = {"lockconsole": [], "raw": []}
    full_sides = {
        "lockconsole": lambda: _per_cycle(full_lc(job.name), full_block, cpu["lockconsole"]),
        "raw": lambda: _per_cycle(
            lambda: raw.full_cycle(raw_lock, raw_ledger), full_block, cpu["raw"]
        ),
    }
    if async_job is not None:
        full_sides["async"] = lambda: _per_cycle(full_lc(async_job.name), full_block)
    merged = MergedStatements(cfg, job) if strategy == "pg-session" else None
    if merged is not None:
        full_sides["merged"] = lambda: _per_cycle(merged.cycle, full_block)
    for fn in full_sides.values():  # warm up, as above (and the kept run_once session)
        fn()
    for spent in cpu.values():
        spent.clear()
    full = {k: median(v) for k, v in interleave(full_sides, BLOCKS).items()}
    own_cpu = median(a - b for a, b in zip(cpu["lockconsole"], cpu["raw"], strict=True))
    raw_lock.close()
    raw_ledger.close()
    if merged is not None:
        merged.close()

    notes = {}
    if "noprep_ratio" in engine:
        notes["engine"] = (
            f"vs a raw connection without prepared statements (prepare_threshold=None): "
            f"{engine['noprep_ratio']:.2f}x"
        )
    floor = engine["raw"]
    ledger_ms = (full["raw"] - floor) * 1e3
    notes["only"] = (
        f"recording the attempt (ledger INSERT + UPDATE, two commits) costs {ledger_ms:.2f} ms "
        f"raw; the bare lock SQL {floor * 1e3:.2f} ms"
    )
    tag = f"lock cycle {strategy}"
    rows = []
    if "merged" in full:
        rows.append(
            Row(
                f"{tag}: run_once's merged statements alone vs the naive four",
                full["merged"],
                full["raw"],
                "s",
                status="info",
                note="what run_once sends (2 round trips) through its libpq pipeline alone, "
                "none of the engine's Python: what merging the statements gains by itself",
            )
        )
    if "async" in full:
        rows.append(
            Row(
                f"{tag}: run_once, ledger_commit = async, vs the naive four",
                full["async"],
                full["raw"],
                "s",
                FULL_TARGETS[strategy],
                note="the outcome's commit does not wait for the WAL flush; the naive four wait",
            )
        )
    rows.append(
        Row(
            f"{tag}: lockconsole's own CPU per attempt",
            own_cpu,
            None,
            "s",
            limit=OWN_CPU_LIMIT,
            note=f"user + sys of the whole process per run_once cycle "
            f"({median(cpu['lockconsole']) * 1e6:.0f} us), minus the naive four's "
            f"({median(cpu['raw']) * 1e6:.0f} us); the median over the interleaved blocks",
        )
    )
    return [
        Row(
            f"{tag}: engine",
            engine["lockconsole"],
            floor,
            "s",
            TARGET,
            note=notes.get("engine", ""),
        ),
        Row(
            f"{tag}: run_once vs the naive four",
            full["lockconsole"],
            full["raw"],
            "s",
            FULL_TARGETS[strategy],
        ),
        Row(
            f"{tag}: run_once vs lock SQL only",
            full["lockconsole"],
            floor,
            "s",
            status="info",
            note=notes["only"],
        ),
        *rows,
    ]


def cleanup(cfg: Any, u: str) -> None:
    import psycopg
    import pymysql

    jobs = [j.name for j in cfg.jobs.values()]
    with raw_pg() as conn:
        conn.execute(f"DROP TABLE IF EXISTS bench_shedlock_{u}")  # our own table, named per run
        try:
            conn.execute("DELETE FROM lockconsole_runs WHERE job = ANY(%s)", (jobs,))
            # 40,000 dead rows would slow the figures after this one (the console's ledger read)
            conn.execute("VACUUM lockconsole_runs")
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
