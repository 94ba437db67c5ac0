"""Run-request pickup: from `requests.submit` (the row committed, and on PostgreSQL its NOTIFY
sent) to the job's function starting on the serving instance.

A `RequestServer` in this process serves one job with the default poll interval
(`serving.POLL_INTERVAL`, 2 s); the bench queues ROUNDS requests one after another and takes
the time from each submit to the job's start (a threading.Event the job sets). On PostgreSQL the
server is woken by the NOTIFY (target: worst at most 1 s); on MariaDB it finds the request at
its next poll, so its figure (about half the poll interval on average, the whole of it at worst)
is shown as info. Each request is queued after a random pause of up to one poll interval, so it
falls at any phase of the server's polling (one queued right after a run ends would otherwise
always wait a whole interval). Both sides include what serving costs: the claim, the job's
lock, the ledger.
"""

from __future__ import annotations

import os
import random
import threading
import time
from datetime import timedelta

from .common import Row, config, main, median, mysql_url, pg_url, progress, uid

ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_PICKUP_ROUNDS", 20))
LIMIT = 1.0  # seconds: a NOTIFY is meant to get a request picked up within 1 s


def pickups(url: str, strategy: str, rounds: int = ROUNDS) -> list[float]:
    """Seconds from submit to the job's start, for `rounds` requests served one at a time."""
    from lockconsole.backends.ledger import requests
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.slots import utcnow
    from lockconsole.serving import POLL_INTERVAL, RequestServer

    job = f"pickup_{uid()}"
    cfg = config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        "once_per_slot = false\n"
    )
    started = threading.Event()
    server = RequestServer(
        cfg, [cfg.job(job)], instance="bench-1", targets={job: started.set}
    ).start()
    took: list[float] = []
    try:
        if not server.looked.wait(60):
            raise RuntimeError("the request server did not make its first look within 60 s")
        with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
            for _ in range(rounds):
                time.sleep(random.uniform(0, POLL_INTERVAL))  # at any phase of the server's poll
                started.clear()
                now = utcnow()
                begin = time.perf_counter()
                asked = requests.submit(
                    ledger,
                    job,
                    slot=None,
                    instance=None,
                    forced=False,
                    requested_by="bench",
                    now=now,
                    expires_at=now + timedelta(minutes=5),
                )
                if not started.wait(60):
                    raise RuntimeError(f"request {asked} was not picked up within 60 s")
                took.append(time.perf_counter() - begin)
                deadline = time.monotonic() + 60  # the run ends before the next request
                while time.monotonic() < deadline:
                    found = requests.get(ledger, asked)
                    if found is not None and found.final:
                        break
                    time.sleep(0.01)
    finally:
        server.stop()
    return took


def run() -> list[Row]:
    progress(f"request pickup on PostgreSQL (NOTIFY), {ROUNDS} requests")
    pg = pickups(pg_url(), "pg-session")
    progress(f"request pickup on MariaDB (polled every 2 s), {ROUNDS} requests")
    my = pickups(mysql_url(), "mysql")
    return [
        Row(
            "request pickup, PostgreSQL (NOTIFY): median",
            median(pg),
            None,
            "s",
            limit=LIMIT,
            note=f"submit to the job's start, {ROUNDS} requests; worst {max(pg):.3f} s",
        ),
        Row("request pickup, PostgreSQL (NOTIFY): worst", max(pg), None, "s", limit=LIMIT),
        Row(
            "request pickup, MariaDB (polled): median",
            median(my),
            None,
            "s",
            status="info",
            note=f"poll interval 2 s; worst {max(my):.3f} s over {ROUNDS} requests",
        ),
    ]


if __name__ == "__main__":
    main(run)
