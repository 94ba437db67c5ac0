"""Soak: 8 racing instances (real processes) fire the billing job every slot while faults are
injected (terminated lock sessions, kill -9 of the holder, slow jobs); then every slot is
accounted for from the ledger and the invoices table holds no duplicate.

Short form (60 slots) in `make test`; LOCKCONSOLE_SOAK=long (`make soak`) runs 500 slots.
The table is printed (run with -s) and written to tests/faults/last_soak.txt (not committed).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.console.reports import overlap_seconds
from lockconsole.model.jobs import Run

from fault_helpers import (
    create_invoices,
    duplicate_invoices,
    invoices,
    job_config,
    runs_of,
    start_worker,
)

LONG = os.environ.get("LOCKCONSOLE_SOAK", "").lower() == "long"
SLOTS = 500 if LONG else 60
INSTANCES = 8
PERIOD = 0.3  # seconds between firings
WATCHDOG = 0.05  # the periodic backstop; a terminated session is noticed on its socket at once
SLOW_DELAY = 0.015 * 5  # the slow job's step: it looks at `attempt.lost` between tenants
# A takeover after a lost lock overlaps the old holder only until the loss is noticed (on the
# socket, or at worst by the periodic check), the job's step ends and its finish is written.
OVERLAP_BOUND = WATCHDOG + SLOW_DELAY + 0.25
TENANTS = 3
REPORT = Path(__file__).with_name("last_soak.txt")
BASE = datetime(2030, 1, 1, tzinfo=UTC)
# instances whose wall clocks are off (seconds): the ledger's times are the server's all the same
CLOCK_SKEW = {"web-3": 90.0, "web-6": -45.0}


class Fleet:
    """The racing instances; a killed one is started again under the same name."""

    def __init__(self, config: Path, job: str, table: str, start_file: Path) -> None:
        self.args = (config, job, table)
        self.start_file = start_file
        self.procs: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()
        for i in range(INSTANCES):
            self.start(f"web-{i}")
        for proc in self.procs.values():  # each prints "ready" once imported and configured
            assert proc.stdout is not None and "ready" in proc.stdout.readline()
        self.t0 = time.time() + 0.5
        start_file.with_suffix(".tmp").write_text(str(self.t0))
        start_file.with_suffix(".tmp").rename(start_file)  # appears whole

    def start(self, name: str) -> None:
        extra = ["--retry", "0.12"] if int(name[4:]) % 2 == 0 else []  # late schedulers
        self.procs[name] = start_worker(
            *self.args[:2],
            name,
            self.args[2],
            "--soak",
            "0",
            str(PERIOD),
            str(SLOTS + 1),
            "--start-file",
            str(self.start_file),
            "--tenants",
            str(TENANTS),
            "--delay",
            "0.015",
            "--slow-every",
            "7",
            *extra,
            clock_shift=CLOCK_SKEW.get(name, 0.0),
        )

    def kill9(self, name: str) -> None:
        with self.lock:
            proc = self.procs[name]
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=10)
            self.start(name)

    def wait(self) -> None:
        for proc in list(self.procs.values()):
            proc.communicate(timeout=SLOTS * PERIOD + 120)


def inject_faults(fleet: Fleet, pg_conn, job: str, stop: threading.Event, done: dict) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(4242)
    query = (
        "select a.pid, a.application_name from pg_locks l join pg_stat_activity a using (pid) "
        "where l.locktype = 'advisory' and l.granted and a.application_name like %s"
    )
    while not stop.wait(rng.uniform(0.4, 1.2)):
        rows = pg_conn.execute(query, (f"lockconsole:{job}@%",)).fetchall()
        if not rows:
            continue
        pid, app = rows[0]
        if rng.random() < 0.5:
            pg_conn.execute("select pg_terminate_backend(%s)", (pid,))
            done["terminate"] += 1
        else:
            fleet.kill9(app.rsplit("@", 1)[1])
            done["kill -9"] += 1


def race(fleet: Fleet, inject: Callable[[Fleet, threading.Event], None]) -> None:
    """Let the fleet fire every slot while `inject` runs beside it (until it is told to stop)."""
    stop = threading.Event()
    injector = threading.Thread(target=inject, args=(fleet, stop))
    injector.start()
    try:
        time.sleep(max(0.0, fleet.t0 + SLOTS * PERIOD - time.time()))
    finally:
        stop.set()
        injector.join()
        fleet.wait()


def tally(runs: list[Run], rows: list[tuple]) -> tuple[dict[str, int], float]:
    """Each slot's attempts from the ledger, by kind, and the longest overlap (seconds).

    Kinds: exactly-one, takeover (a second instance finished what a lost one began), double,
    missed; beside them, how many slots saw a lock_lost, an abandoned attempt, an attempt left
    acquired, an overlap, and how many the ledger accounts for. A slot that succeeded has
    every tenant's invoice."""
    by_slot = defaultdict(list)
    for run in runs:
        by_slot[run.slot].append(run)
    per_slot = defaultdict(set)
    for tenant, period, *_ in rows:
        per_slot[period].add(tenant)
    counts: dict[str, int] = defaultdict(int)
    longest = 0.0
    for slot in (BASE + timedelta(minutes=i) for i in range(1, SLOTS + 1)):
        attempts = by_slot.get(slot, [])
        ran = [r for r in attempts if r.outcome != "skipped"]
        ok = [r for r in ran if r.outcome == "succeeded"]
        kind = (
            "missed"
            if not ok
            else "double"
            if len(ok) > 1
            else "exactly-one"
            if len(ran) == 1
            else "takeover"
        )
        counts[kind] += 1
        counts["accounted"] += bool(attempts)
        counts["lock_lost"] += any(r.outcome == "lock_lost" for r in ran)
        counts["abandoned"] += any("abandoned" in (r.message or "") for r in ran)
        counts["left open"] += any(r.outcome == "acquired" for r in ran)
        overlap = overlap_seconds(ran, datetime.now(UTC))
        counts["overlap"] += overlap > 0
        longest = max(longest, overlap)
        if ok:
            assert per_slot[slot.isoformat()] == set(range(TENANTS)), slot
    return counts, longest


def assert_exactly_once(counts: dict[str, int], dupes: int, faults: dict[str, int]) -> None:
    """What every soak must show: no double run or invoice, every slot in the ledger."""
    assert dupes == 0
    assert counts["double"] == 0, "two full runs of one slot"
    assert counts["accounted"] == SLOTS, "every slot has its attempts in the ledger"
    assert counts["exactly-one"] + counts["takeover"] + counts["missed"] == SLOTS
    assert counts["exactly-one"] >= SLOTS // 2
    assert sum(faults.values()) >= 3


def test_soak(pg_url, pg_conn, uid, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job, table = f"billing_{uid}", f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)
    config = job_config(
        tmp_path / "lockconsole.toml", pg_url, job, "pg-session", watchdog_interval=WATCHDOG
    )
    with config.open("a", encoding="utf-8") as f:  # the operator's check reads every attempt
        f.write("[console]\nhistory_limit = 100000\n")
    started = time.monotonic()
    fleet = Fleet(config, job, table, tmp_path / "t0")
    faults = {"terminate": 0, "kill -9": 0}
    race(fleet, lambda fleet, stop: inject_faults(fleet, pg_conn, job, stop, faults))
    elapsed = time.monotonic() - started
    left_before_check = sum(r.outcome == "acquired" for r in runs_of(config, job))
    with Console(load_config(str(config))) as console:  # an operator's `check` after the soak
        swept = sum(a.kind == "abandoned" for a in console.snapshot(duplicates=False).alerts)

    runs = runs_of(config, job)
    rows = invoices(pg_conn, "postgresql", table)
    pg_conn.execute(f"drop table {table}")
    counts, longest = tally(runs, rows)
    dupes = duplicate_invoices(rows)
    # the skewed instances' attempts carry the server's time and their own offset
    for name, skew in CLOCK_SKEW.items():
        offsets = [
            r.clock_offset_ms / 1000
            for r in runs
            if r.instance == name and r.clock_offset_ms is not None
        ]
        assert offsets and all(abs(o - skew) < 2 for o in offsets), (name, offsets[:5])
    starts = [r.started_at for r in runs]
    assert (max(starts) - min(starts)).total_seconds() < elapsed + 5, "a skewed clock in the ledger"
    table_text = "\n".join(
        [
            f"soak: {SLOTS} slots x {INSTANCES} instances, {len(runs)} attempts in "
            f"{elapsed:.0f} s; "
            f"faults injected: {faults['terminate']} terminate, {faults['kill -9']} kill -9, "
            "slow job every 7th slot, clock skew "
            + ", ".join(f"{n} {s:+.0f} s" for n, s in CLOCK_SKEW.items()),
            "| slots | exactly-one | takeover | double | overlap (longest) | missed | lock_lost "
            "| abandoned (closed by check) | abandoned left open | duplicate invoices "
            "| accounted by the ledger |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {SLOTS} | {counts['exactly-one']} | {counts['takeover']} | {counts['double']} "
            f"| {counts['overlap']} ({longest * 1000:.0f} ms) | {counts['missed']} "
            f"| {counts['lock_lost']} | {counts['abandoned']} ({swept}) | {counts['left open']} "
            f"| {dupes} | {counts['accounted']}/{SLOTS} |",
        ]
    )
    print("\n" + table_text)
    REPORT.write_text(table_text + "\n", encoding="utf-8")
    assert_exactly_once(counts, dupes, faults)
    assert counts["left open"] == 0, f"attempts left acquired ({left_before_check} before check)"
    assert longest <= OVERLAP_BOUND, f"two executions overlapped for {longest:.3f} s"
