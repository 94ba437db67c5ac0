"""`lockconsole metrics`: serve /metrics (--listen HOST:PORT) or write a textfile (--textfile)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path

from lockconsole.model.errors import UsageError

EXTRA_MISSING = (
    "metrics: the prometheus_client package is not installed; install the extra: "
    "pip install 'lockconsole[metrics]'"
)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "metrics",
        help="Prometheus metrics: serve /metrics, or write a node_exporter textfile",
        description="Export what the console shows as Prometheus metrics (read-only). "
        "Needs the metrics extra: pip install 'lockconsole[metrics]'.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--listen", metavar="HOST:PORT", help="serve /metrics here until stopped (port 0: any)"
    )
    where.add_argument(
        "--textfile",
        metavar="PATH",
        help="write the metrics once to PATH (ends in .prom), atomically, and exit",
    )
    p.set_defaults(handler=run)


def listen_address(text: str) -> tuple[str, int]:
    """HOST:PORT (or [v6]:PORT) as (host, port); a bad one is a UsageError."""
    host, sep, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"metrics: --listen takes HOST:PORT, e.g. 127.0.0.1:9464, not {text!r}")
    return host, int(port)


def textfile_path(text: str) -> Path:
    """The --textfile path: ends in .prom (all node_exporter reads), in an existing folder."""
    path = Path(text)
    if path.suffix != ".prom":
        raise UsageError("metrics: --textfile must end in .prom (node_exporter reads only those)")
    if not path.parent.is_dir():
        raise UsageError(f"metrics: --textfile's folder {str(path.parent)!r} does not exist")
    return path


def run(args: argparse.Namespace) -> int:
    address = listen_address(args.listen) if args.listen else None
    path = textfile_path(args.textfile) if args.textfile else None
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        raise UsageError(EXTRA_MISSING) from None
    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console
    from lockconsole.metrics.export import (
        ConsoleCollector,
        registry_for,
        registry_of,
        serve,
        write_textfile,
    )
    from lockconsole.metrics.saved_counters import kept

    config = load_config(args.config)
    # serving, the exporter is a long-running sampler: it writes the holder journal (a
    # textfile run is one sample, which would see holders appear and never go)
    journal = address is not None and config.ledger.journal and not args.read_only
    with Console(config, read_only=True, journal=journal) as console:
        if path is not None:
            collector = ConsoleCollector(console, duplicates=True)
            with kept(collector, path):  # the counters go on from the last run's
                size = write_textfile(registry_of(collector), path)
            print(f"wrote {size} bytes of metrics to {path}", file=sys.stderr)
            return 0
        assert address is not None
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda _signum, _frame: stop.set())
        try:
            host, port, _server = serve(registry_for(console, duplicates=None), *address)
        except OSError as exc:
            raise UsageError(f"metrics: cannot listen on {args.listen}: {exc.strerror}") from None
        print(f"serving metrics on http://{host}:{port}/metrics", file=sys.stderr, flush=True)
        stop.wait()
        return 0
