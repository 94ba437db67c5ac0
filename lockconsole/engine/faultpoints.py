"""Named instants in the run path where a test can pause a real process (a cross-process barrier).

Off unless $LOCKCONSOLE_TEST_BARRIER_DIR is set when the module is imported: then `reach(name)`
pauses at the points listed in $LOCKCONSOLE_TEST_BARRIER_AT (comma-separated names). A paused
process writes `<dir>/<name>.reached` (its pid) and waits until `<dir>/<name>.go` exists, so a
test can place a fault (a signal, a terminate, a KILL) at exactly that instant, then let go.
In-process tests can instead register a callable with `set_hook(name, fn)`.

Production cost: one global lookup and a falsy test per point.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

_DIR = os.environ.get("LOCKCONSOLE_TEST_BARRIER_DIR") or None
_AT = frozenset(filter(None, os.environ.get("LOCKCONSOLE_TEST_BARRIER_AT", "").split(",")))
_HOOKS: dict[str, Callable[[], None]] = {}
_ACTIVE = bool(_DIR and _AT)
# The points of an attempt, in order (one name per instant; tests import these names):
CONNECTING = "connecting"  # begin(): before the lock and ledger connections are opened
BEFORE_TRY_LOCK = "before_try_lock"  # begin(): connected, the lock not tried yet
AFTER_ACQUIRE = "after_acquire"  # begin(): the lock is held and the attempt recorded
BEFORE_SPAWN = "before_spawn"  # Command.start(): the job's supervisor not started yet
AFTER_SPAWN = "after_spawn"  # Command.start(): the supervisor exists, the job not started
JOB_STARTED = "job_started"  # Command.start(): the job was told to start
BEFORE_RECORD = "before_record"  # run_target(): the job ended; not recorded nor released yet
STOP_REQUESTED = "stop_requested"  # Stop.request(): a stop was requested and passed on
LOCK_LOST = "lock_lost"  # Attempt: the watchdog saw the lock go and flagged the attempt
ATTEMPT_POINTS = (
    CONNECTING,
    BEFORE_TRY_LOCK,
    AFTER_ACQUIRE,
    BEFORE_SPAWN,
    AFTER_SPAWN,
    JOB_STARTED,
    BEFORE_RECORD,
)
# `schedule`'s start: its signal handlers set, the request server and the journal sampler
# started (they connect to the databases), its loop not entered yet
SCHEDULE_STARTING = "schedule_starting"
BARRIER_TIMEOUT = 120.0  # a forgotten barrier fails the process instead of hanging CI


def reach(name: str) -> None:
    """Pass the point `name`: a no-op unless a test placed a barrier or a hook there."""
    if _ACTIVE or _HOOKS:
        _pause(name)


def set_hook(name: str, fn: Callable[[], None] | None) -> None:
    """Call `fn` whenever this process reaches `name` (None removes it). For tests only."""
    global _HOOKS
    hooks = dict(_HOOKS)
    if fn is None:
        hooks.pop(name, None)
    else:
        hooks[name] = fn
    _HOOKS = hooks


def _pause(name: str) -> None:
    hook = _HOOKS.get(name)
    if hook is not None:
        hook()
    if not (_ACTIVE and name in _AT):
        return
    folder = Path(_DIR or ".")
    (folder / f"{name}.reached").write_text(str(os.getpid()))
    go = folder / f"{name}.go"
    deadline = time.monotonic() + BARRIER_TIMEOUT
    while not go.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"fault point {name!r}: no go after {BARRIER_TIMEOUT:.0f} s")
        time.sleep(0.002)
