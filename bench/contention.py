"""Contention: 64 OS processes race for one job's slot; exactly one may get it.

Each process is forked with lockconsole already imported, waits for a common start time and
then calls `runner.begin` (connect, try the lock, record the attempt in the ledger): its
decision time runs from the start time to begin's return. The winner holds the lock until
every process has decided. The figure is the slowest decision of the 64 against the decision
of a lone process; the raw side does the same race with psycopg (connect + try-lock), so the
note can say how much of the spread is the machine (64 processes on the cores there are).

Two more races say where lockconsole's extra time goes (info rows): racers that connect as
lockconsole does and send only its try-lock through its libpq pipeline, and racers that also
send `decide_run` with it (the two statements of a fresh connection's attempt, captured from a
real one), with none of the engine's Python around them.

64 racers on a machine with fewer cores cannot decide together: each decision needs CPU (a
Python process, and a server backend forked for its connection), so the last one waits for
most of the others. The same race is therefore also run with as many racers as there are
cores, where the processes do run side by side, and lockconsole's slowest of 64 is also set
beside the raw driver's slowest of 64 (info rows).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from .common import Row, config, main, median, pg_url, progress, raw_pg, uid

PROCESSES = int(os.environ.get("LOCKCONSOLE_BENCH_RACERS", 64))
ROUNDS = 3  # races per side
SPLIT_ROUNDS = 5  # races per side of the split (info rows): their medians move more
LONE_ROUNDS = 5  # lone decisions per side
TARGET = 2.0
RAW_TARGET = 1.3  # lockconsole's slowest decision (connect, try-lock, record) vs psycopg's
START_MARGIN = 0.3  # seconds between "everyone is ready" and the start


def _wait_for_the_start(index: int, ready: Any, start: Any, go: Any) -> None:
    """Say this racer is ready, then wait for the common start time."""
    ready.put(index)
    start.wait()
    time.sleep(max(0.0, go.value - time.time()))


def _lockconsole_racer(
    cfg: Any,
    job_name: str,
    slot: datetime,
    index: int,
    ready: Any,
    start: Any,
    go: Any,
    done: Any,
    out: Any,
) -> None:
    from lockconsole.engine.runner import begin

    job = cfg.job(job_name)
    _wait_for_the_start(index, ready, start, go)
    try:
        attempt = begin(
            job, cfg.database_for(job), cfg.ledger_for(job), instance=f"racer-{index}", slot=slot
        )
    except Exception as exc:  # report, never hang the parent
        out.put((index, False, time.time() - go.value, str(exc)))
        return
    out.put((index, attempt.acquired, time.time() - go.value, attempt.run.message))
    if attempt.acquired:
        done.wait(60)
        attempt.finish("succeeded", exit_code=0)


def _raw_racer(key: int, index: int, ready: Any, start: Any, go: Any, done: Any, out: Any) -> None:
    import psycopg

    _wait_for_the_start(index, ready, start, go)
    try:
        conn = psycopg.connect(pg_url(), autocommit=True)
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
    except psycopg.Error as exc:
        out.put((index, False, time.time() - go.value, str(exc)))
        return
    out.put((index, got, time.time() - go.value, None))
    if got:
        done.wait(60)
    conn.close()


def _statements_racer(
    cfg: Any,
    job_name: str,
    statements: list[tuple[str, dict[str, Any]]],
    slot: datetime,
    index: int,
    ready: Any,
    start: Any,
    go: Any,
    done: Any,
    out: Any,
) -> None:
    """lockconsole's connect, then `statements` (the try-lock, and decide_run if given) in one
    pipeline through its Wire: an attempt's statements without the engine."""
    from lockconsole.backends.connect import connect_pg
    from lockconsole.backends.postgres.wire import wire_for

    database = cfg.database_for(cfg.job(job_name))
    sent = [(sql, dict(params)) for sql, params in statements]  # this racer's own copy
    if len(sent) > 1:
        sent[1][1].update(slot=slot, instance=f"racer-{index}")
    _wait_for_the_start(index, ready, start, go)
    try:
        conn = connect_pg(database.url, application_name=f"racer-{index}")
        answer = wire_for(conn).exchange(sent)
        tried = answer.row(0)
        if answer.error is not None or tried is None:
            raise RuntimeError(f"no answer: {answer.error}")
        got = bool(tried[1])
    except Exception as exc:  # report, never hang the parent
        out.put((index, False, time.time() - go.value, str(exc)))
        return
    out.put((index, got, time.time() - go.value, None))
    if got:
        done.wait(60)
    conn.close()


def _fresh_statements(cfg: Any, job: str, slot: datetime) -> list[tuple[str, dict[str, Any]]]:
    """The try-lock and decide_run of one attempt on fresh connections, as sent."""
    from lockconsole import run_once
    from lockconsole.backends.postgres import wire

    sent: list[tuple[str, dict[str, Any]]] = []
    exchange = wire.Wire.exchange

    def capture(self: Any, statements: Any) -> Any:
        sent.extend((sql, dict(params)) for sql, params in statements)
        return exchange(self, statements)

    wire.Wire.exchange = capture  # type: ignore[method-assign]
    try:
        with run_once(job, config=cfg, instance="capture", slot=slot, reuse_connections=False):
            pass
    finally:
        wire.Wire.exchange = exchange  # type: ignore[method-assign]
    return sent[:2]


def race(target: Any, args: tuple[Any, ...], processes: int) -> tuple[int, list[float], list[str]]:
    """(how many acquired, every decision time, errors) of one race of `processes` processes."""
    ctx = mp.get_context("fork")
    ready, out = ctx.Queue(), ctx.Queue()
    start, done = ctx.Event(), ctx.Event()
    go = ctx.Value("d", 0.0)
    procs = [
        ctx.Process(target=target, args=(*args, i, ready, start, go, done, out), daemon=True)
        for i in range(processes)
    ]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    go.value = time.time() + START_MARGIN
    start.set()
    results = [out.get(timeout=120) for _ in procs]
    done.set()
    for p in procs:
        p.join(60)
    acquired = sum(1 for r in results if r[1])
    errors = [r[3] for r in results if r[3] and not r[3].startswith(("lock held", "slot already"))]
    return acquired, [r[2] for r in results], errors


def _warm(cfg: Any, job: str, slot: datetime) -> None:
    """One attempt in the parent before any fork: every racer then starts as a process that has
    run the job before (its modules imported and compiled, its SQL loaded), and the raw racers
    likewise find psycopg imported. The attempt's connections are closed, never inherited."""
    from lockconsole import run_once

    from .cold_start import _compile_bytecode

    _compile_bytecode()
    with run_once(job, config=cfg, instance="warm", slot=slot, reuse_connections=False):
        pass


def run() -> list[Row]:
    u = uid()
    job = f"bench_race_{u}"
    job_async = job + "_async"  # the same race, its skips not waiting for the WAL flush
    cfg = config(
        f'[databases.main]\nurl = "{pg_url()}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        f'schedule = "*/5 * * * *"\n[jobs.{job_async}]\nstrategy = "pg-session"\n'
        'schedule = "*/5 * * * *"\nledger_commit = "async"\n'
    )
    key = int(cfg.job(job).key.value) ^ 1  # the raw race's own key
    base = datetime(2026, 1, 1, tzinfo=UTC)
    slots = iter(base + timedelta(minutes=5 * i) for i in range(1000))
    _warm(cfg, job, next(slots))
    _warm(cfg, job_async, next(slots))

    def lc(n: int) -> tuple[int, list[float], list[str]]:
        return race(_lockconsole_racer, (cfg, job, next(slots)), n)

    def lc_async(n: int) -> tuple[int, list[float], list[str]]:
        return race(_lockconsole_racer, (cfg, job_async, next(slots)), n)

    def raw(n: int) -> tuple[int, list[float], list[str]]:
        return race(_raw_racer, (key,), n)

    statements = _fresh_statements(cfg, job, next(slots))

    def try_only(n: int) -> tuple[int, list[float], list[str]]:
        return race(_statements_racer, (cfg, job, statements[:1], next(slots)), n)

    def statements_only(n: int) -> tuple[int, list[float], list[str]]:
        return race(_statements_racer, (cfg, job, statements, next(slots)), n)

    lc(1), raw(1)  # warm up: the ledger table, the server's caches
    progress(f"contention: {LONE_ROUNDS} lone decisions per side")
    lone = {"lc": [], "raw": []}  # type: dict[str, list[float]]
    for _ in range(LONE_ROUNDS):
        lone["lc"] += lc(1)[1]
        lone["raw"] += raw(1)[1]
    progress(f"contention: {ROUNDS} races of {PROCESSES} processes per side")
    names = ("lc", "raw", "async", "try", "statements", "split_raw")
    slowest: dict[str, list[float]] = {name: [] for name in names}
    winners: dict[str, list[int]] = {name: [] for name in names}
    problems: list[str] = []
    sides: tuple[tuple[str, Any], ...] = (("lc", lc), ("raw", raw), ("async", lc_async))
    for i in range(ROUNDS):
        for side, fn in sides if i % 2 == 0 else sides[::-1]:
            acquired, times, errors = fn(PROCESSES)
            winners[side].append(acquired)
            slowest[side].append(max(times))
            problems += errors
    # the split, in races of its own after the others (interleaved with them, its extra load
    # made lockconsole's own slowest 0.2x worse), against raw races of its own
    progress(f"contention: {SPLIT_ROUNDS} races of {PROCESSES} a side: try-lock, statements")
    split = (("split_raw", raw), ("try", try_only), ("statements", statements_only))
    for i in range(SPLIT_ROUNDS):
        for side, fn in split if i % 2 == 0 else split[::-1]:
            acquired, times, errors = fn(PROCESSES)
            winners[side].append(acquired)
            slowest[side].append(max(times))
            problems += errors
    cores = os.cpu_count() or 1
    progress(f"contention: {LONE_ROUNDS} races of {cores} processes (one per core)")
    per_core: list[float] = []
    for _ in range(LONE_ROUNDS):
        acquired, times, errors = lc(cores)
        winners["lc"].append(acquired)
        per_core.append(max(times))
        problems += errors
    with raw_pg() as conn:
        conn.execute("DELETE FROM lockconsole_runs WHERE job = ANY(%s)", ([job, job_async],))

    lc_lone, raw_lone = median(lone["lc"]), median(lone["raw"])
    lc_slow, raw_slow = median(slowest["lc"]), median(slowest["raw"])
    exactly_one = all(w == 1 for name in names for w in winners[name])
    print(
        f"contention: acquired per race: lockconsole {winners['lc']}, raw {winners['raw']} "
        f"({'exactly one each' if exactly_one else 'NOT exactly one'})"
    )
    note = (
        f"acquired per race {winners['lc']} (exactly one: {'yes' if exactly_one else 'NO'}); "
        f"raw psycopg race: slowest {raw_slow * 1e3:.0f} ms vs lone {raw_lone * 1e3:.1f} ms "
        f"= {raw_slow / raw_lone:.1f}x; lockconsole's slowest vs raw's slowest "
        f"{lc_slow / raw_slow:.2f}x"
    )
    if problems:
        note += f"; errors: {problems[:3]}"
    return [
        Row(
            f"contention: slowest of {PROCESSES} vs lone decision",
            lc_slow,
            lc_lone,
            "s",
            TARGET,
            note=note,
            status=None if exactly_one and not problems else "ERROR",
        ),
        Row(
            f"contention: raw slowest of {PROCESSES} vs raw lone",
            raw_slow,
            raw_lone,
            "s",
            status="info",
        ),
        Row(
            f"contention: slowest of {PROCESSES}, lockconsole vs raw",
            lc_slow,
            raw_slow,
            "s",
            RAW_TARGET,
            note="the same race of the same processes, each side's slowest",
            status=None if exactly_one and not problems else "ERROR",
        ),
        Row(
            f"contention: slowest of {PROCESSES}, ledger_commit = async, vs raw",
            median(slowest["async"]),
            raw_slow,
            "s",
            RAW_TARGET,
            note=f"the 63 skips do not wait for the WAL flush; acquired {winners['async']}",
            status=None if exactly_one and not problems else "ERROR",
        ),
        Row(
            f"contention: slowest of {PROCESSES}, lockconsole's connect and try-lock alone, vs raw",
            median(slowest["try"]),
            median(slowest["split_raw"]),
            "s",
            note="its connect, then the try-lock through its libpq pipeline: no ledger, no engine",
            status="info" if exactly_one and not problems else "ERROR",
        ),
        Row(
            f"contention: slowest of {PROCESSES}, lockconsole's statements alone, vs raw",
            median(slowest["statements"]),
            median(slowest["split_raw"]),
            "s",
            note="its connect, then the try-lock and decide_run in one pipeline (a fresh "
            "connection's attempt, captured): what recording costs on a cold backend, no engine",
            status="info" if exactly_one and not problems else "ERROR",
        ),
        Row(
            f"contention: slowest of {cores} (one per core) vs lone decision",
            median(per_core),
            lc_lone,
            "s",
            TARGET,
            note=f"{cores} racers on {cores} cores",
        ),
    ]


if __name__ == "__main__":
    main(run)
