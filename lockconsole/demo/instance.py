"""One simulated app instance of the demo fleet: `python -m lockconsole.demo.instance`.

It runs lockconsole's Scheduler over the demo config's scheduled jobs, exactly as
`lockconsole schedule --instance web-N` would, with one difference: its clock starts the
schedule at --first-slot, the firing right after the seeded history, so no slot falls between
the history and the live fleet. Like `schedule`, it serves run requests (the console's trigger
"on the fleet", `lockconsole request`) and honours pauses. It stops on SIGTERM, or when the demo
that started it is gone.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from lockconsole.model.slots import utcnow

PARENT_POLL = 1.0  # seconds between checks that the demo is still there


class AlignedClock:
    """utcnow(), except that the first reading is at most just before `first_slot`."""

    def __init__(self, first_slot: datetime) -> None:
        self.first_slot = first_slot
        self._first = True

    def __call__(self) -> datetime:
        now = utcnow()
        if self._first:
            self._first = False
            return min(now, self.first_slot - timedelta(microseconds=1))
        return now


def watch_parent(on_gone: Callable[[], None]) -> threading.Thread:
    """Call `on_gone` once the parent process has died (we were re-parented)."""
    parent = os.getppid()

    def watch() -> None:
        stop = threading.Event()
        while not stop.wait(PARENT_POLL):
            if os.getppid() != parent:
                on_gone()
                return

    thread = threading.Thread(target=watch, name="lockconsole-demo-parent", daemon=True)
    thread.start()
    return thread


def main(argv: Sequence[str] | None = None) -> int:
    """Run one instance's scheduler until SIGTERM (or the demo goes away)."""
    from lockconsole.config.loader import load_config
    from lockconsole.engine.scheduler import Scheduler

    parser = argparse.ArgumentParser(prog="python -m lockconsole.demo.instance")
    parser.add_argument("--config", required=True)
    parser.add_argument("--instance", required=True)
    parser.add_argument("--first-slot", required=True, help="ISO time of the first firing")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    config = load_config(args.config)
    jobs = [job for job in config.jobs.values() if job.schedule]
    clock = AlignedClock(datetime.fromisoformat(args.first_slot))
    scheduler = Scheduler(config, jobs, instance=args.instance, clock=clock)
    watch_parent(lambda: scheduler.stop("the demo went away"))
    from lockconsole.serving import RequestServer

    server = RequestServer(config, list(config.jobs.values()), instance=args.instance).start()
    try:
        return scheduler.run_forever()
    finally:
        server.stop(wait=5.0)


if __name__ == "__main__":
    raise SystemExit(main())
