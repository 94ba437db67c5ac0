"""The figures as Prometheus metrics: a collector over the Console, served or written to a file.

Needs the `prometheus_client` package (the `metrics` extra); lockconsole.metrics.command checks
for it before importing this module.
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

from lockconsole.metrics.audits import AuditCounters
from lockconsole.metrics.counters import Counters
from lockconsole.metrics.figures import PREFIX, Figure, figures, known_jobs

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade


class ConsoleCollector(Collector):
    """Takes one console snapshot per scrape and yields its figures: gauges, and the counters
    it keeps (a textfile's are kept between runs by metrics/saved_counters.py)."""

    def __init__(self, console: ConsoleFacade, *, duplicates: bool | None) -> None:
        self.console = console
        self.duplicates = duplicates  # True: scan now; None: the latest background scan
        self.counters = Counters(console.config)
        self.audits = AuditCounters(console.config)
        self._lock = threading.Lock()  # one snapshot at a time, however many scrapers

    def describe(self) -> list[Metric]:
        return []  # nothing at registration: a scrape is the only time the databases are read

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            started = time.monotonic()
            snap = self.console.snapshot(duplicates=self.duplicates)
            took = time.monotonic() - started
            shown = figures(snap, self.console.config, took)
            known = known_jobs(snap, self.console.config)
            self.counters.advance(snap, known)
            shown += self.counters.figures(known)
            self.audits.advance(self.console, snap.taken_at - self.console.config.console.lookback)
            shown += self.audits.figures()
        for figure in shown:
            yield family_of(figure)


def family_of(figure: Figure) -> Metric:
    """A figure as a gauge or a counter family (prometheus_client adds a counter's _total)."""
    family: GaugeMetricFamily | CounterMetricFamily
    if figure.kind == "counter":
        family = CounterMetricFamily(PREFIX + figure.name, figure.help, labels=figure.labels)
    else:
        family = GaugeMetricFamily(PREFIX + figure.name, figure.help, labels=figure.labels)
    for labels, value in figure.samples:
        family.add_metric(labels, value)
    return family


def registry_for(console: ConsoleFacade, *, duplicates: bool | None) -> CollectorRegistry:
    return registry_of(ConsoleCollector(console, duplicates=duplicates))


def registry_of(collector: ConsoleCollector) -> CollectorRegistry:
    """A registry of that one collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def serve(registry: CollectorRegistry, host: str, port: int) -> tuple[str, int, object]:
    """Serve /metrics in a background thread; the address bound (port 0 picks one), server."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound = server.server_address
    return str(bound[0]), int(bound[1]), server


def write_textfile(registry: CollectorRegistry, path: Path) -> int:
    """Write the metrics to `path` atomically, so node_exporter never reads half a file; the
    bytes written."""
    data = generate_latest(registry)
    write_atomically(path, data, mode=0o644)  # node_exporter often runs as another user
    return len(data)


def write_atomically(path: Path, data: bytes, *, mode: int | None = None) -> None:
    """`data` into `path` by a hidden temporary file beside it, synced, then renamed over it:
    a reader sees the old file or the new one, never half of one."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise
