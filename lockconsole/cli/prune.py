"""`lockconsole prune`: delete the ledger's old attempts, output tails and finished requests, in
every ledger the configuration names, in short batches (backends/ledger/retention/)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import timedelta
from typing import Any

from lockconsole.model.errors import LockconsoleError, UsageError

MAX_BATCH = 100_000


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prune",
        help="delete ledger rows older than [ledger] retention (or --older-than), in batches",
        description="Delete attempts that started before the ledger server's now minus the "
        "retention, their output tails, finished run requests and the holder journal's "
        "holdings gone by then, in every ledger the "
        "configuration names; a slot that was not plain ok keeps a summary row. Audited; "
        "refused under --read-only unless --dry-run.",
    )
    p.add_argument(
        "--older-than",
        metavar="DURATION",
        help="prune what is older than this (default: [ledger] retention), e.g. 90d",
    )
    p.add_argument("--dry-run", action="store_true", help="count what would go; change nothing")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument(
        "--batch-size",
        type=int,
        default=None,
        metavar="N",
        help="attempts per batch, each its own short transaction (default 1000)",
    )
    p.set_defaults(handler=run)


def older_than(args: argparse.Namespace, retention: timedelta | None, lookback: timedelta) -> Any:
    """The age to prune from: --older-than, else [ledger] retention; refused when neither is
    set or it is shorter than the lookback (UsageError: one line, exit 2)."""
    from lockconsole.config.settings import check_retention

    if args.older_than is None:
        if retention is None:
            raise UsageError(
                "prune: no retention: set [ledger] retention in the configuration or give "
                "--older-than DURATION"
            )
        return retention
    try:
        return check_retention(args.older_than, lookback)
    except ValueError as exc:
        raise UsageError(f"prune: --older-than: {exc}") from None


def run(args: argparse.Namespace) -> int:
    if args.read_only and not args.dry_run:
        raise UsageError("prune refused: --read-only is set; nothing was done (--dry-run counts)")
    batch = args.batch_size
    if batch is not None and not 1 <= batch <= MAX_BATCH:
        raise UsageError(f"prune: --batch-size must be a whole number from 1 to {MAX_BATCH}")
    from lockconsole.backends.audit import Actor
    from lockconsole.backends.ledger.retention.fleet import audited_prune, ledgers
    from lockconsole.backends.ledger.retention.prune import BATCH
    from lockconsole.config.loader import load_config

    config = load_config(args.config)
    age = older_than(args, config.retention, config.console.lookback)
    actor = Actor.current()
    results: list[dict[str, Any]] = []
    failed: LockconsoleError | None = None
    for database in ledgers(config):
        try:
            report = audited_prune(
                database, actor, age, dry_run=args.dry_run, batch_size=batch or BATCH
            )
        except LockconsoleError as exc:
            failed = failed or exc
            results.append({"ledger": database.name, "error": " ".join(str(exc).split())})
            if not args.json:
                _say_error(database.name, exc)
            continue
        results.append(report_json(report))
        if not args.json:
            _say(report)
    if args.json:
        print(json.dumps({"older_than_s": age.total_seconds(), "ledgers": results}, indent=2))
    return failed.exit_code if failed is not None else 0


def report_json(report: Any) -> dict[str, Any]:
    return {
        "ledger": report.ledger,
        "dry_run": report.dry_run,
        "busy": report.busy,
        "cutoff": report.cutoff.isoformat() if report.cutoff else None,
        "deleted": {
            "runs": report.runs,
            "run_output": report.outputs,
            "requests": report.requests,
            "holder_journal": report.journal,
        },
        "summaries": report.summaries,
        "kept_with_newer_slot": report.kept,
        "batches": report.batches,
        "largest_batch_rows": report.largest_batch,
        "elapsed_s": round(report.elapsed, 6),
        "longest_batch_s": round(report.longest_batch, 6),
        "longest_lock_s": round(report.longest_lock, 6),
    }


def _say(report: Any) -> None:
    from lockconsole.text.safe import shown

    cutoff = report.cutoff.isoformat(timespec="seconds") if report.cutoff else "-"
    head = f"ledger {report.ledger}" + (" (dry run)" if report.dry_run else "")
    print(shown(f"{head}: cutoff {cutoff}: {report.line()}"))
    if not report.busy:
        print(
            shown(
                f"  runs {report.runs}, run_output {report.outputs}, requests "
                f"{report.requests}, holder journal {report.journal}, slot summaries "
                f"{report.summaries}; longest lock held "
                f"{report.longest_lock * 1000:.0f} ms"
            )
        )


def _say_error(name: str, exc: BaseException) -> None:
    from lockconsole.text.safe import shown

    text = " ".join(str(exc).split())
    print(f"lockconsole: prune of ledger {shown(name)}: {shown(text)}", file=sys.stderr)
