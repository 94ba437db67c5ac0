"""Soak: 8 racing instances (real processes) fire the billing job every slot while faults are
injected (terminated lock sessions, kill -9 of the holder, a hung peer on the way to the
database, slow jobs, skewed clocks); then every slot is accounted for from the ledger and the
invoices table holds no duplicate.

Short form (60 slots) in `make test`; LOCKCONSOLE_SOAK=long (`make soak`) runs 500 slots.
The table is printed (run with -s) and written to tests/faults/last_soak.txt (not committed).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.console.snapshot.reports import overlap_seconds
from lockconsole.model.jobs import Run

from tests.faults.fault_helpers import (
    create_invoices,
    duplicate_invoices,
    invoices,
    job_config,
    runs_of,
    start_worker,
)
from tests.faults.hung_peers import SLACK, HungPeers, hang_lines, hang_summary, hung_attempt

LONG = os.environ.get("LOCKCONSOLE_SOAK", "").lower() == "long"
SLOTS = 500 if LONG else 60
INSTANCES = 8
PERIOD = 0.3  # seconds between firings
WATCHDOG = 0.05  # the periodic backstop; a terminated session is noticed on its socket at once
SLOW_DELAY = 0.015 * 5  # the slow job's step: it looks at `attempt.lost` between tenants
# A takeover after a lost lock overlaps the old holder only until the loss is noticed (on the
# socket, or at worst by the periodic check), the job's step ends and its finish is written.
OVERLAP_BOUND = WATCHDOG + SLOW_DELAY + 0.25
# a check of the lock with no answer by then counts as a lost lock (a hung peer gives none)
LOCK_CHECK_TIMEOUT = 0.4
# behind a hung peer the socket says nothing: the loss is noticed by a periodic check (due
# within 1.25 intervals) that times out, so a takeover meanwhile overlaps that much longer
# the hung-peer instances' slow step (every 5th slot): that job (1.05 s) outlasts the deadline
HUNG_STEP = 0.35
HUNG_OVERLAP_BOUND = 1.25 * WATCHDOG + LOCK_CHECK_TIMEOUT + WATCHDOG + HUNG_STEP + 0.25
# instances reaching PostgreSQL through a peer of the test's own that the injector hangs
HUNG_PEERS = ("web-1", "web-4")
HANG_SECONDS = (0.5 * LOCK_CHECK_TIMEOUT, 3 * LOCK_CHECK_TIMEOUT)  # how long a hang lasts
TENANTS = 3
REPORT = Path(__file__).with_name("last_soak.txt")
BASE = datetime(2030, 1, 1, tzinfo=UTC)
# instances whose wall clocks are off (seconds): the ledger's times are the server's all the same
CLOCK_SKEW = {"web-3": 90.0, "web-6": -45.0}


class Fleet:
    """The racing instances; a killed one is started again under the same name, and so is one
    that exited on its own before its last slot (counted in `exits`, with its last words)."""

    def __init__(
        self,
        configs: Path | dict[str, Path],
        job: str,
        table: str,
        start_file: Path,
        app_url: str | None = None,
    ) -> None:
        """`configs`: one config for every instance, or per instance name with "*" for the
        rest; `app_url`: the invoices' database, when some configs reach it another way."""
        self.configs = configs if isinstance(configs, dict) else {"*": configs}
        self.job, self.table, self.app_url = job, table, app_url
        self.start_file = start_file
        self.procs: dict[str, subprocess.Popen] = {}
        self.errs: dict[str, deque[str]] = {}  # each instance's last stderr lines
        self.overdue = 0  # "no answer within" lines: calls a hung peer left past their deadline
        self.exits: list[tuple[str, int | None, list[str]]] = []
        # when the job of a hung-peer instance's run stopped on a lost lock (its wall clock)
        self.stops: dict[int, float] = {}
        self.readers: list[threading.Thread] = []
        self.lock = threading.Lock()
        for i in range(INSTANCES):
            self.start(f"web-{i}")
        for name, proc in self.procs.items():  # each prints "ready" once imported and configured
            assert proc.stdout is not None and "ready" in proc.stdout.readline()
            self._drain(name, proc)
        self.t0 = time.time() + 0.5
        start_file.with_suffix(".tmp").write_text(str(self.t0))
        start_file.with_suffix(".tmp").rename(start_file)  # appears whole

    def start(self, name: str) -> subprocess.Popen:
        extra = ["--retry", "0.12"] if int(name[4:]) % 2 == 0 else []  # late schedulers
        if name not in HUNG_PEERS:
            # a peer adds its own delay, so on a fast machine the instances behind one would
            # rarely win a slot and never be hung holding it: every 3rd slot the others are late
            extra += ["--lag-every", "3", "--lag", "0.03"]
        self.procs[name] = start_worker(
            self.configs.get(name, self.configs["*"]),
            self.job,
            name,
            self.table,
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
            *(["5", "--slow-delay", str(HUNG_STEP)] if name in HUNG_PEERS else ["7"]),
            *(["--app-url", self.app_url] if self.app_url else []),
            *extra,
            clock_shift=CLOCK_SKEW.get(name, 0.0),
        )
        return self.procs[name]

    def _drain(self, name: str, proc: subprocess.Popen) -> None:
        """Read the worker's output as it comes (a full pipe would stall the worker)."""
        errs = self.errs.setdefault(name, deque(maxlen=20))

        def out() -> None:
            for line in proc.stdout:
                if name in HUNG_PEERS and "stopped_at" in line:
                    stop = json.loads(line)
                    self.stops[stop["run_id"]] = stop["stopped_at"]

        def err() -> None:
            for line in proc.stderr:
                errs.append(line.rstrip())
                if "no answer within" in line:
                    with self.lock:
                        self.overdue += 1

        for read in (out, err):
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            self.readers.append(reader)

    def restart(self, name: str) -> None:
        self._drain(name, self.start(name))

    def kill9(self, name: str) -> None:
        with self.lock:
            proc = self.procs[name]
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        self.restart(name)

    def revive(self) -> None:
        """Start again every instance that exited on its own before the soak's end."""
        for name, proc in list(self.procs.items()):
            if proc.poll() is not None:
                self.exits.append((name, proc.returncode, list(self.errs.get(name, ()))))
                self.restart(name)

    def wait(self) -> None:
        for proc in list(self.procs.values()):
            proc.wait(timeout=SLOTS * PERIOD + 120)
        for reader in self.readers:
            reader.join(timeout=10)


HOLDERS = (
    "select a.pid, a.application_name, clock_timestamp(), a.state "
    "from pg_locks l join pg_stat_activity a using (pid) "
    "where l.locktype = 'advisory' and l.granted and a.application_name like %s"
)


def inject_faults(
    fleet: Fleet, peers: HungPeers, pg_conn, job: str, stop: threading.Event, done: dict
) -> None:
    """Every 0.4-1.2 s one fault on the lock's holder: its session terminated, its process
    killed, or (a third of the time) its peer hung once a hung-peer instance holds the lock."""
    rng = random.Random(4242)
    pattern = (f"lockconsole:{job}@%",)
    last_hang = fleet.t0 + SLOTS * PERIOD - 1.0  # a hang is resumed before the last slot
    next_fault = time.monotonic() + rng.uniform(0.4, 1.2)
    while not stop.is_set():
        wake = min(next_fault, peers.next_resume() or next_fault)
        if stop.wait(max(0.0, wake - time.monotonic())):
            break
        now = time.monotonic()
        peers.resume_due(now)
        fleet.revive()
        if now < next_fault:
            continue
        next_fault = now + rng.uniform(0.4, 1.2)
        if rng.random() < 1 / 3 and peers.free() and time.time() < last_hang:
            hung = _hang_a_holder(peers, pg_conn, pattern, stop, mid_job=rng.random() < 0.5)
            if hung is not None:
                done["hung peer"] += 1
            continue
        rows = _holders_within(pg_conn, pattern, stop, 1.0)
        if not rows:
            continue
        pid, app, *_ = rows[0]
        if rng.random() < 0.5:
            pg_conn.execute("select pg_terminate_backend(%s)", (pid,))
            done["terminate"] += 1
        else:
            fleet.kill9(app.rsplit("@", 1)[1])
            done["kill -9"] += 1
    peers.resume_all()


def _holders_within(pg_conn, pattern: tuple[str], stop: threading.Event, seconds: float):
    """The lock's holders once there is one, looked for every 10 ms for up to `seconds`: a
    short job on a fast machine holds its lock for a small part of each slot."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not stop.is_set():
        rows = pg_conn.execute(HOLDERS, pattern).fetchall()
        if rows:
            return rows
        stop.wait(0.01)
    return []


def _hang_a_holder(
    peers: HungPeers, pg_conn, pattern: tuple[str], stop: threading.Event, mid_job: bool
):
    """Wait (up to 3 s) for an instance behind a free peer to hold the lock while its job runs
    (the lock's session idle: not in the statement that takes the lock, or lets it go at once
    for a slot that already ran), then hang it. With `mid_job`, only once it has held the lock
    for 0.1 s: a slow job, with tenants left to charge when its check's deadline passes."""
    deadline = time.monotonic() + 3.0
    seen: dict[int, float] = {}  # holder pid -> when first seen holding
    while time.monotonic() < deadline and not stop.is_set():
        for pid, app, held_at, state in pg_conn.execute(HOLDERS, pattern).fetchall():
            name = app.rsplit("@", 1)[1]
            if name not in peers.free() or state != "idle":
                continue
            since = seen.setdefault(pid, time.monotonic())
            if not mid_job or time.monotonic() - since >= 0.1:
                return peers.hang(name, pid, held_at, pg_conn, time.monotonic())
        stop.wait(0.01)
    return None


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


def tally(
    runs: list[Run], rows: list[tuple], hung_slots: frozenset[datetime] = frozenset()
) -> tuple[dict[str, int], float]:
    """Each slot's attempts from the ledger, by kind, and the longest overlap (seconds).

    Kinds: exactly-one, takeover (a second instance finished what a lost one began), double,
    missed; beside them, how many slots saw a lock_lost, an abandoned attempt, an attempt left
    acquired, an overlap, and how many the ledger accounts for. A slot that succeeded has
    every tenant's invoice. An overlap is held to OVERLAP_BOUND, or to HUNG_OVERLAP_BOUND in
    the slots a hung peer met."""
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
        bound = HUNG_OVERLAP_BOUND if slot in hung_slots else OVERLAP_BOUND
        counts["over bound"] += overlap > bound
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


def test_soak(pg_url, pg_conn, uid, tmp_path) -> None:
    job, table = f"billing_{uid}", f"invoices_{uid}"
    create_invoices(pg_conn, "postgresql", table)
    knobs = {"watchdog_interval": WATCHDOG, "lock_check_timeout": LOCK_CHECK_TIMEOUT}
    config = job_config(tmp_path / "lockconsole.toml", pg_url, job, "pg-session", **knobs)
    with config.open("a", encoding="utf-8") as f:  # the operator's check reads every attempt
        f.write("[console]\nhistory_limit = 100000\n")
    peers = HungPeers(pg_url, HUNG_PEERS, random.Random(2626), HANG_SECONDS)
    configs = {"*": config}
    for name in HUNG_PEERS:  # the proxy is no pooler: a sidecar forwarding each session as is
        path = tmp_path / f"lockconsole-{name}.toml"
        configs[name] = job_config(
            path, peers.url_of(name), job, "pg-session", allow_pooler=True, **knobs
        )
    started = time.monotonic()
    faults = {"terminate": 0, "kill -9": 0, "hung peer": 0}
    try:
        fleet = Fleet(configs, job, table, tmp_path / "t0", pg_url)
        race(fleet, lambda fleet, stop: inject_faults(fleet, peers, pg_conn, job, stop, faults))
    finally:
        peers.resume_all()
        peers.close()
    elapsed = time.monotonic() - started
    left_before_check = sum(r.outcome == "acquired" for r in runs_of(config, job))
    with Console(load_config(str(config))) as console:  # an operator's `check` after the soak
        swept = sum(a.kind == "abandoned" for a in console.snapshot(duplicates=False).alerts)

    runs = runs_of(config, job)
    rows = invoices(pg_conn, "postgresql", table)
    pg_conn.execute(f"drop table {table}")
    counts, longest = tally(runs, rows, frozenset(hung_slots(peers, runs)))
    dupes = duplicate_invoices(rows)
    hung, noticed = hang_summary(peers.hangs, runs)
    stopped = job_stops(peers, runs, fleet.stops)
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
    results = ", ".join(
        f"{hung[k]} {k}"
        for k in (
            "lock lost",
            "lock lost, closed by another",
            "unknown end",
            "unknown end, runner killed",
            "succeeded",
            "succeeded, finished before its session ended",
            "SUCCEEDED UNSEEN",
            "failed",
            "no attempt found",
        )
        if hung[k]
    )
    table_text = "\n".join(
        [
            f"soak: {SLOTS} slots x {INSTANCES} instances, {len(runs)} attempts in "
            f"{elapsed:.0f} s; "
            f"faults injected: {faults['terminate']} terminate, {faults['kill -9']} kill -9, "
            f"{faults['hung peer']} hung peer, slow job every 7th slot (every 5th on the hung "
            f"peers, {HUNG_STEP} s a tenant), clock skew "
            + ", ".join(f"{n} {s:+.0f} s" for n, s in CLOCK_SKEW.items()),
            f"hung peers ({', '.join(HUNG_PEERS)}, lock_check_timeout {LOCK_CHECK_TIMEOUT} s): "
            f"{faults['hung peer']} hangs ({hung['terminated']} with the session terminated, "
            f"{hung['left alive']} left alive); the hung attempt recorded: {results or '-'}; "
            f"longest from a hang to its job's stop {stopped * 1000:.0f} ms, to its row's "
            f"lock_lost end {noticed * 1000:.0f} ms; {fleet.overdue} calls past their deadline; "
            f"runner exits {len(fleet.exits)}"
            + "".join(f" ({n}: {e[-1] if e else code})" for n, code, e in fleet.exits),
            "| slots | exactly-one | takeover | double | overlap (longest) | missed | lock_lost "
            "| abandoned (closed by check) | abandoned left open | duplicate invoices "
            "| hung peer | accounted by the ledger |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
            f"| {SLOTS} | {counts['exactly-one']} | {counts['takeover']} | {counts['double']} "
            f"| {counts['overlap']} ({longest * 1000:.0f} ms) | {counts['missed']} "
            f"| {counts['lock_lost']} | {counts['abandoned']} ({swept}) | {counts['left open']} "
            f"| {dupes} | {faults['hung peer']} | {counts['accounted']}/{SLOTS} |",
        ]
    )
    print("\n" + table_text)
    every_hang = "\n".join(["each hang:", *hang_lines(peers.hangs, runs)])
    if not LONG:
        print(every_hang)
    REPORT.write_text(table_text + "\n" + every_hang + "\n", encoding="utf-8")
    assert_exactly_once(counts, dupes, faults)
    assert counts["left open"] == 0, f"attempts left acquired ({left_before_check} before check)"
    assert counts["over bound"] == 0, f"two executions overlapped for {longest:.3f} s"
    # a runner behind a hung peer never dies of it; another may exit when its session is ended
    # in the middle of a try-lock (run_once raises the DatabaseError, the billing worker exits
    # on it), and is started again by the Fleet
    assert not [e for e in fleet.exits if e[0] in HUNG_PEERS], fleet.exits
    # a correctness bound, not a measurement (the table has the figure): HUNG_OVERLAP_BOUND
    # on a machine that keeps up, a 5 s ceiling on a starved one (it ran on for ever before)
    assert stopped <= 5.0, f"a job ran on {stopped:.3f} s behind a hung peer"
    assert faults["hung peer"] >= 1
    for hang in peers.hangs:  # never vouched for after the server ended its session
        run = hung_attempt(hang, runs)
        if hang.terminated is not None and run is not None and run.outcome == "succeeded":
            # only a finish the server ran (check, record, release: one statement) before it
            # ended the session; its finished_at is taken before that statement is sent
            assert run.finished_at is not None and run.finished_at <= hang.terminated + SLACK, run


def job_stops(peers: HungPeers, runs: list[Run], stops: dict[int, float]) -> float:
    """The longest time from a hang to the stop of its attempt's job on the lost lock (seconds),
    among the hangs that met a job still running (it had tenants left to charge)."""
    longest = 0.0
    for hang in peers.hangs:
        run = hung_attempt(hang, runs)
        if run is not None and run.id in stops:
            longest = max(longest, stops[run.id] - hang.at.timestamp())
    return longest


def hung_slots(peers: HungPeers, runs: list[Run]) -> set[datetime]:
    """The slots a hang met: the hung attempt's, and those its instance tried while hung."""
    slots = set()
    for hang in peers.hangs:
        run = hung_attempt(hang, runs)
        if run is not None:
            slots.add(run.slot)
        until = hang.at + timedelta(seconds=hang.resumed_after + LOCK_CHECK_TIMEOUT + 1)
        slots.update(
            r.slot
            for r in runs
            if r.instance == hang.instance and r.started_at and hang.at <= r.started_at <= until
        )
    return slots
