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
from datetime import UTC, datetime, timedelta
from pathlib import Path

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
TENANTS = 3
REPORT = Path(__file__).with_name("last_soak.txt")
BASE = datetime(2030, 1, 1, tzinfo=UTC)


class Fleet:
    """The racing instances; a killed one is started again under the same name."""

    def __init__(self, config: Path, job: str, table: str, t0: float) -> None:
        self.args = (config, job, table)
        self.t0 = t0
        self.procs: dict[str, subprocess.Popen] = {}
        self.lock = threading.Lock()
        for i in range(INSTANCES):
            self.start(f"web-{i}")

    def start(self, name: str) -> None:
        extra = ["--retry", "0.12"] if int(name[4:]) % 2 == 0 else []  # late schedulers
        self.procs[name] = start_worker(
            *self.args[:2], name, self.args[2], "--soak", str(self.t0), str(PERIOD),
            str(SLOTS + 1), "--tenants", str(TENANTS), "--delay", "0.015",
            "--slow-every", "7", *extra,
        )  # fmt: skip

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


def test_soak(pg_url, pg_conn, uid, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job, table = f"billing_{uid}", f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)
    config = job_config(tmp_path / "lockconsole.toml", pg_url, job, "pg-session",
                        watchdog_interval=0.05)  # fmt: skip
    started = time.monotonic()
    fleet = Fleet(config, job, table, time.time() + 4)
    stop, faults = threading.Event(), {"terminate": 0, "kill -9": 0}
    injector = threading.Thread(target=inject_faults, args=(fleet, pg_conn, job, stop, faults))
    injector.start()
    try:
        time.sleep(4 + SLOTS * PERIOD)
    finally:
        stop.set()
        injector.join()
        fleet.wait()
    elapsed = time.monotonic() - started

    runs = runs_of(config, job)
    rows = invoices(pg_conn, "postgresql", table)
    pg_conn.execute(f"drop table {table}")
    by_slot = defaultdict(list)
    for run in runs:
        by_slot[run.slot].append(run)
    per_slot = defaultdict(set)
    for tenant, period, *_ in rows:
        per_slot[period].add(tenant)
    slots = [BASE + timedelta(minutes=i) for i in range(1, SLOTS + 1)]
    counts = defaultdict(int)
    for slot in slots:
        attempts = by_slot.get(slot, [])
        ran = [r for r in attempts if r.outcome != "skipped"]
        ok = [r for r in ran if r.outcome == "succeeded"]
        kind = ("missed" if not ok else "double" if len(ok) > 1
                else "exactly-one" if len(ran) == 1 else "takeover")  # fmt: skip
        counts[kind] += 1
        counts["accounted"] += bool(attempts)
        counts["lock_lost"] += any(r.outcome == "lock_lost" for r in ran)
        counts["abandoned"] += any("abandoned" in (r.message or "") for r in ran)
        counts["running"] += any(r.outcome == "acquired" for r in ran)
        if ok:
            assert per_slot[slot.isoformat()] == set(range(TENANTS)), slot
    dupes = duplicate_invoices(rows)
    table_text = "\n".join([
        f"soak: {SLOTS} slots x {INSTANCES} instances, {len(runs)} attempts in {elapsed:.0f} s; "
        f"faults injected: {faults['terminate']} terminate, {faults['kill -9']} kill -9, "
        "slow job every 7th slot",
        "| slots | exactly-one | takeover | double | missed | lock_lost | abandoned (kill -9) "
        "| duplicate invoices | accounted by the ledger |",
        "|---|---|---|---|---|---|---|---|---|",
        f"| {SLOTS} | {counts['exactly-one']} | {counts['takeover']} | {counts['double']} "
        f"| {counts['missed']} | {counts['lock_lost']} | {counts['abandoned']} | {dupes} "
        f"| {counts['accounted']}/{SLOTS} |",
    ])  # fmt: skip
    print("\n" + table_text)
    REPORT.write_text(table_text + "\n", encoding="utf-8")
    assert dupes == 0
    assert counts["double"] == 0, "two full runs of one slot"
    assert counts["accounted"] == SLOTS, "every slot has its attempts in the ledger"
    assert counts["exactly-one"] + counts["takeover"] + counts["missed"] == SLOTS
    assert counts["exactly-one"] >= SLOTS // 2
    assert faults["terminate"] + faults["kill -9"] >= 3
