"""The stale holder: `python -m lockconsole.demo.stale` takes invoice_reminders' lock and idles.

It is the bug the console exists to find: the reminders worker on web-2 took lock 4243 on a
pooled connection, failed, and handed the connection back to the pool without
pg_advisory_unlock. The ledger says the run is over (failed); the session still holds the
lock, idle, so no instance can run the job again until an operator releases it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import replace

from lockconsole.demo import REMINDERS_JOB
from lockconsole.demo.instance import watch_parent

READY = "stale holder ready"
FAILURE = (
    "SMTP timeout after 30s; the worker returned its pooled connection without "
    "pg_advisory_unlock, so that idle session still holds the lock"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Take the lock, record a failed run, print READY, then idle until told to stop."""
    import os
    import socket

    from lockconsole.backends.factory import open_lock
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import load_config
    from lockconsole.engine.runner import application_name
    from lockconsole.model.jobs import Run
    from lockconsole.model.slots import slot_for, utcnow

    parser = argparse.ArgumentParser(prog="python -m lockconsole.demo.stale")
    parser.add_argument("--config", required=True)
    parser.add_argument("--instance", default="web-2")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    job = config.job(REMINDERS_JOB)
    lock = open_lock(
        job,
        config.database_for(job),
        instance=args.instance,
        application_name=application_name(job, args.instance),
    )
    if not lock.acquire():
        print(f"{REMINDERS_JOB}: lock already held", file=sys.stderr, flush=True)
        return 3
    started = utcnow()
    run = Run(
        job=job.name,
        slot=slot_for(job, started),
        instance=args.instance,
        host=socket.gethostname(),
        pid=os.getpid(),
        trigger="scheduled",
        outcome="acquired",
        started_at=started,
        session_id=lock.session_id,
        strategy=job.strategy,
        lock_key=str(job.key),
    )
    with Ledger(config.ledger_for(job)) as ledger:
        run = ledger.record(run)
        ledger.finish(replace(run), "failed", exit_code=1, message=FAILURE)
    print(f"{READY} pid={os.getpid()} session={lock.session_id}", flush=True)
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda _s, _f: done.set())
    watch_parent(done.set)
    while not done.is_set():  # a sleep, not done.wait(): the handler calls done.set()
        time.sleep(0.2)
    lock.close()  # the session ends; the lock goes with it
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
