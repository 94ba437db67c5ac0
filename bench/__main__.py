"""`python -m bench [FIGURE ...]` (`make bench`): run every figure, or those named, and print
one table (name, lockconsole, raw, ratio, target, verdict), also written to bench/results.json.
`python -m bench --link 0.35` is the link mode: run_once against the naive four through a
proxy that adds 0.35 ms each way (`make bench-link`); `link_cycle` is also part of every run.

Figures run one after another, each closing its connections before the next starts (the
contention and snapshot figures need most of max_connections for a few seconds).
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

from .common import RESULTS, Row, ensure_databases, table, write_results

FIGURES = (
    "lock_cycle",
    "round_trips",
    "link_cycle",
    "redis_cycle",
    "cold_start",
    "contention",
    "snapshot",
    "duplicates",
    "console",
    "console_fleet",
    "ledger",
    "lock_loss",
    "request_pickup",
    "ledger_size",
    "metrics",
    "prune",
    "journal",
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "figures",
        nargs="*",
        metavar="FIGURE",
        help=f"which to run (default: all): {', '.join(FIGURES)}",
    )
    parser.add_argument(
        "--link",
        metavar="DELAY_MS",
        type=float,
        help="the link mode: run_once against the naive four through a proxy that adds "
        "DELAY_MS each way (default 0.35, about 1 ms round trip here); alone, or with the "
        "figures named",
    )
    args = parser.parse_args(argv)
    if args.link is not None:
        import os

        os.environ["LOCKCONSOLE_BENCH_LINK_DELAY_MS"] = str(args.link)
        args.figures = args.figures or ["link_cycle"]
    unknown = [f for f in args.figures if f not in FIGURES]
    if unknown:
        parser.error(f"unknown figure(s) {', '.join(unknown)} (choose from {', '.join(FIGURES)})")
    ensure_databases()
    rows: list[Row] = []
    start = time.perf_counter()
    for name in args.figures or FIGURES:
        began = time.perf_counter()
        print(f"bench {name} ...", file=sys.stderr, flush=True)
        try:
            rows += importlib.import_module(f"bench.{name}").run()
        except Exception as exc:  # one broken figure must not hide the others
            traceback.print_exc()
            rows.append(
                Row(name, None, None, "s", status="error", note=f"{type(exc).__name__}: {exc}")
            )
        print(f"bench {name}: {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    took = time.perf_counter() - start
    print(table(rows))
    print(f"\ntotal {took:.0f} s; written to {RESULTS.relative_to(RESULTS.parent.parent)}")
    write_results(rows, took)
    return 1 if any(r.verdict == "error" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
