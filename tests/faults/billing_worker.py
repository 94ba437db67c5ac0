"""A tiny billing job, run as a real process by the fault tests.

It charges N tenants one by one, slowly, each through `lockconsole.idempotency.claim` into an
invoices table with a unique (tenant_id, period) key, and records the run id and fencing
token on every invoice it wrote. One attempt (--slot) or a soak loop (--soak):

    python billing_worker.py CONFIG JOB INSTANCE TABLE --slot ISO [--tenants N] [--delay S]
    python billing_worker.py CONFIG JOB INSTANCE TABLE --soak T0 PERIOD COUNT [--retry S]

--skew SECONDS shifts this process's idea of "now" (the app clock), to show leases ignore it.
One attempt prints its Run as JSON and exits with `lockconsole run`'s exit code; --soak prints
one line per attempt. A charge that loses its claim (the key was taken) is counted in
`blocked` - the double charge the unique key prevented.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lockconsole.api import run_once
from lockconsole.backends.connect import connect
from lockconsole.config.loader import load_config
from lockconsole.engine import faultpoints
from lockconsole.engine.runner import exit_code_for
from lockconsole.idempotency import claim


def _skew_clock(seconds: float) -> None:
    """Move the app clock: every utcnow() lockconsole reads is off by `seconds`."""
    from lockconsole.engine import runner
    from lockconsole.model import slots

    real = slots.utcnow

    def skewed() -> datetime:
        return real() + timedelta(seconds=seconds)

    slots.utcnow = runner.utcnow = skewed  # (min_hold is an interval on the monotonic clock)


def bill(attempt, conn, table: str, period: str, tenants: int, delay: float, counts: dict) -> None:
    """Charge every tenant once for `period`; the lock's run id and token go on the invoice."""
    for tenant in range(tenants):
        if attempt.lost.is_set():  # when the job stops on it (this process's clock)
            counts["stopped_at"], counts["run_id"] = time.time(), attempt.run.id
        attempt.check()  # LockLostError once the watchdog saw the lock go
        row = {
            "tenant_id": tenant,
            "period": period,
            "run_id": attempt.run.id,
            "token": attempt.run.fencing_token,
            "instance": attempt.run.instance,
        }
        if _claim_retrying(conn, table, row):
            counts["charged"] += 1
        else:
            counts["blocked"] += 1
        faultpoints.reach(f"charged_{counts['charged']}")  # a test may pause the job here
        time.sleep(delay)


class AppDatabase:
    """The app's own connection; reconnects (for ~15 s) when the database went away."""

    def __init__(self, url, name: str) -> None:
        self.url, self.name, self.conn = url, name, connect(url, application_name=name)

    def claim(self, table: str, row: dict) -> bool:
        deadline = time.monotonic() + 15
        while True:
            try:
                return claim(self.conn, table, row, key=("tenant_id", "period"))
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
                try:
                    self.conn.close()
                    self.conn = connect(self.url, application_name=self.name)
                except Exception:
                    pass


def _claim_retrying(db: AppDatabase, table: str, row: dict) -> bool:
    return db.claim(table, row)


def attempt_once(config, job, instance, table, slot, tenants, delay, conn) -> tuple[Any, dict]:
    counts: dict[str, Any] = {"charged": 0, "blocked": 0}
    guard = run_once(job, config=config, instance=instance, slot=slot)
    try:
        with guard as attempt:
            if attempt.acquired:
                bill(attempt, conn, table, slot.isoformat(), tenants, delay, counts)
    except Exception as exc:  # LockLostError, or a database error: the ledger has it
        if guard.attempt is None:  # refused before any attempt (e.g. PoolerRefused)
            raise
        counts["error"] = f"{type(exc).__name__}: {exc}"
    return guard.attempt.run if guard.attempt else None, counts


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("config")
    p.add_argument("job")
    p.add_argument("instance")
    p.add_argument("table")
    p.add_argument("--slot")
    p.add_argument("--soak", nargs=3, type=float, metavar=("T0", "PERIOD", "COUNT"))
    p.add_argument("--start-file")  # --soak: print "ready", then read T0 from this file
    p.add_argument("--retry", type=float, default=0.0)
    p.add_argument("--slow-every", type=int, default=0)
    p.add_argument("--slow-delay", type=float)  # the slow slots' step (default 5 x --delay)
    # every Nth slot this instance fires `--lag` seconds late (the others win that race)
    p.add_argument("--lag-every", type=int, default=0)
    p.add_argument("--lag", type=float, default=0.0)
    p.add_argument("--tenants", type=int, default=5)
    p.add_argument("--delay", type=float, default=0.2)
    p.add_argument("--skew", type=float, default=0.0)
    # the app's own database, when lockconsole's reaches it another way (a peer that may hang)
    p.add_argument("--app-url")
    args = p.parse_args()
    try:
        return _main(args)
    except Exception as exc:  # one line, like the CLI; the class name for the tests
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 1)


def _main(args: argparse.Namespace) -> int:
    if args.skew:
        _skew_clock(args.skew)
    config = load_config(args.config)
    job = config.job(args.job)
    url = config.ledger_for(job).url  # the app database (ledger_database when a proxy is cut)
    if args.app_url:
        from lockconsole.config.urls import parse_url

        url = parse_url(args.app_url)
    conn = AppDatabase(url, f"billing@{args.instance}")
    if args.slot:
        slot = datetime.fromisoformat(args.slot)
        run, counts = attempt_once(
            config, args.job, args.instance, args.table, slot, args.tenants, args.delay, conn
        )
        out = {
            "outcome": run.outcome,
            "id": run.id,
            "token": run.fencing_token,
            "message": run.message,
            **counts,
        }
        print(json.dumps(out), flush=True)
        return exit_code_for(run)
    t0, period, count = args.soak
    if args.start_file:  # every instance is up before the first firing is fixed
        print(json.dumps({"ready": os.getpid()}), flush=True)
        start = Path(args.start_file)
        while not start.exists():
            time.sleep(0.01)
        t0 = float(start.read_text())
    base = datetime(2030, 1, 1, tzinfo=UTC)
    # an instance with a skewed wall clock (the clock shim) keeps the fleet's rhythm: its firings
    # are placed in real time, while everything lockconsole does reads the skewed clock
    shift = float(os.environ.get("LOCKCONSOLE_TEST_CLOCK_SHIFT", "0") or 0)

    def real_time() -> float:
        return time.time() - shift

    index = max(0, int((real_time() - t0) // period))  # a (re)started instance joins from now
    while True:
        # every slot in turn: an instance that falls behind (a starved 2-core machine) fires the
        # slots it is late for at once, as a catching-up scheduler would, instead of leaving
        # them without an attempt
        index += 1
        if index >= count:
            return 0
        lag = args.lag if args.lag_every and index % args.lag_every == 0 else 0.0
        time.sleep(max(0.0, t0 + index * period + lag - real_time()))
        slot = base + timedelta(minutes=index)
        slow = args.slow_every and index % args.slow_every == 0
        delay = (args.slow_delay or args.delay * 5) if slow else args.delay
        for when in (0.0, args.retry) if args.retry else (0.0,):
            if when:
                time.sleep(when)
            run, counts = attempt_once(
                config, args.job, args.instance, args.table, slot, args.tenants, delay, conn
            )
            print(
                json.dumps(
                    {
                        "i": index,
                        "pid": os.getpid(),
                        "outcome": run.outcome if run else None,
                        **counts,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())
