"""Threads lockconsole starts never take SIGINT or SIGTERM.

The kernel hands a signal sent to the process to any thread that does not block it, but Python
runs its handlers in the main thread only. When a helper thread (a watchdog, the socket watch,
a LISTEN session, a request server, a job's pipe reader) takes the signal, the main thread may
act on it late: after a blocking call returns, or after `holding_signals` has put back the
handlers it held them for, so a Ctrl-C meant for "before the job starts" lands inside the job.
Started through `start_quiet`, a thread inherits a signal mask that blocks both, and the
signals always reach the main thread.

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
