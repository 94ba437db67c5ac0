"""The textfile's counters between runs.

`lockconsole metrics --textfile` runs once per call (from cron), so it keeps its counters in a
hidden file beside the textfile (`.NAME.counters.json`: node_exporter reads only `*.prom`) and
goes on from them the next time. Each run holds an exclusive lock on that file from before its
snapshot until its counters are saved, so two runs that overlap count one after the other. A
file that is not this version's state is set aside: the counters start again at 0 (Prometheus
reads that as a reset) and one line on stderr says so.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lockconsole.metrics.export import ConsoleCollector

VERSION = 1


def state_path(textfile: Path) -> Path:
    return textfile.with_name(f".{textfile.name}.counters.json")


@contextmanager
def kept(collector: ConsoleCollector, textfile: Path) -> Iterator[None]:
    """Load the collector's counters from beside `textfile`, and save them after the body."""
    path = state_path(textfile)
    lock = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _load(collector, path)
        yield
        _save(collector, path)
    finally:
        os.close(lock)  # releases the lock


def _load(collector: ConsoleCollector, path: Path) -> None:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return  # the first run: the counters start at 0
    try:
        state = json.loads(text)
        if state.get("version") != VERSION:
            raise ValueError(f"version {state.get('version')!r}")
        collector.counters.restore(state["counters"])
        collector.audits.restore(state["audits"])
    except Exception as exc:  # anything else: start again at 0, and say so
        from lockconsole.metrics.audits import AuditCounters
        from lockconsole.metrics.counters import Counters

        collector.counters = Counters(collector.console.config)
        collector.audits = AuditCounters(collector.console.config)
        print(
            f"metrics: {path.name} is not a counter state this version reads "
            f"({type(exc).__name__}); the counters start again at 0",
            file=sys.stderr,
        )


def _save(collector: ConsoleCollector, path: Path) -> None:
    state = {
        "version": VERSION,
        "counters": collector.counters.state(),
        "audits": collector.audits.state(),
    }
    from lockconsole.metrics.export import write_atomically

    write_atomically(path, json.dumps(state).encode())
