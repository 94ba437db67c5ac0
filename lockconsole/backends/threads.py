"""Threads lockconsole starts never take SIGINT or SIGTERM.

The kernel hands a signal sent to the process to some thread that does not block it (the main
thread when it can take it at once, else another), but Python runs its handlers in the main
thread only: a signal a helper thread (a watchdog, the socket watch, a LISTEN session, a
request server, a job's pipe reader) took is acted on when the main thread next looks, which
can be after a blocking call returns. Started through `start_quiet`, a thread inherits a signal
mask that blocks both, so the main thread is always the one that takes them.

    start_quiet(thread)   start `thread` with SIGINT and SIGTERM blocked in it
"""

from __future__ import annotations

import signal
import threading

QUIET = {signal.SIGINT, signal.SIGTERM}


def start_quiet(thread: threading.Thread) -> None:
    """Start `thread` so that it blocks SIGINT and SIGTERM (a new thread inherits the mask of
    the one starting it; the starter's own mask is put back at once, and a signal that came
    meanwhile is delivered then)."""
    before = signal.pthread_sigmask(signal.SIG_BLOCK, QUIET)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
