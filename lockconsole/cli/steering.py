"""`lockconsole pause | resume | request | output`: steer the fleet's jobs through the ledger's
control table and run requests, and read what a run left (its output tail, or its traceback)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from lockconsole.cli.output import with_schema
from lockconsole.model.errors import UsageError
from lockconsole.text.safe import shown

if TYPE_CHECKING:
    from lockconsole.console.facade import Console
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.jobs import Pause

UNTIL_HELP = "end the pause by itself: an ISO time with a zone, or a duration from now (2h, 30m)"


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("pause", help="pause a job on every instance: its attempts record 'paused'")
    p.add_argument("job", help="the job's name in the config")
    p.add_argument("--note", required=True, metavar="TEXT", help="why (shown to everyone)")
    p.add_argument("--until", metavar="TIME", help=UNTIL_HELP)
    p.add_argument("--json", action="store_true", help="print the pause as one JSON object")
    p.set_defaults(handler=pause_command)

    r = sub.add_parser("resume", help="end a job's pause: its next attempts run again")
    r.add_argument("job", help="the job's name in the config")
    r.add_argument("--json", action="store_true", help="print the ended pause as JSON")
    r.set_defaults(handler=resume_command)

    q = sub.add_parser(
        "request",
        help="ask the fleet to run a job now (or a slot again): one `schedule` instance runs it",
        description="Queue a run request; the first `lockconsole schedule` instance serving the "
        "job to take it runs it under the job's lock. Exit 0 succeeded, 3 skipped or paused, "
        "1 failed, lock lost, expired or error.",
    )
    q.add_argument("job", help="the job's name in the config")
    q.add_argument("--slot", metavar="TIME", help="rerun this slot (ISO time with a zone)")
    q.add_argument("--instance", metavar="NAME", help="only this instance may take it")
    q.add_argument("--force", action="store_true", help="rerun --slot even if it succeeded")
    q.add_argument(
        "--timeout",
        metavar="DURATION",
        default="60s",
        help="expire the request if no instance took it by then (default 60s)",
    )
    q.add_argument("--no-wait", action="store_true", help="print the request's id and return")
    q.add_argument("--json", action="store_true", help="print the final request as JSON")
    q.set_defaults(handler=request_command)

    o = sub.add_parser("output", help="print what a run left: its output tail, or its traceback")
    o.add_argument(
        "run_id", metavar="RUN_ID", help="the run's id as history shows it: LEDGER:ID, or ID"
    )
    o.add_argument("--json", action="store_true", help="print one JSON object (exact text)")
    o.set_defaults(handler=output_command)


def parse_until(text: str) -> datetime | timedelta:
    """--until: an ISO time with a zone, or a duration (from the ledger server's now)."""
    from lockconsole.config.checks import parse_duration

    try:
        return parse_duration(text)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"--until: {text!r} is neither an ISO time (2026-12-01T09:00Z) nor a duration (2h)"
        ) from None
    if value.tzinfo is None:
        raise UsageError(f"--until: {text!r} has no time zone (add Z or +00:00)")
    return value.astimezone(UTC)


def _console(args: argparse.Namespace, *, job: bool = True) -> Console:
    """The console over the config of `args`; an unknown job is one line (exit 2) before any
    connection is opened."""
    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    config = load_config(args.config)
    if job:
        config.job(args.job)
    return Console(config, read_only=args.read_only)


def output_command(args: argparse.Namespace) -> int:
    with _console(args, job=False) as console:
        return _output(console, args)


def request_command(args: argparse.Namespace) -> int:
    with _console(args) as console:
        return _request(console, args)


def pause_command(args: argparse.Namespace) -> int:
    until = None if args.until is None else parse_until(args.until)  # before any connection
    with _console(args) as console:
        return _pause(console, args, until)


def resume_command(args: argparse.Namespace) -> int:
    with _console(args) as console:
        return _resume(console, args)


def pause_json(pause: Pause | None) -> dict[str, object] | None:
    """A pause as JSON-ready values (ISO times)."""
    if pause is None:
        return None
    return {
        "job": pause.job,
        "note": pause.note,
        "paused_by": pause.paused_by,
        "paused_at": pause.paused_at.isoformat(),
        "until": None if pause.until is None else pause.until.isoformat(),
    }


def _pause(
    console: ConsoleFacade, args: argparse.Namespace, until: datetime | timedelta | None
) -> int:
    pause = console.pause(args.job, args.note, until)
    if args.json:
        print(json.dumps(with_schema({"paused": pause_json(pause)})))
    else:
        print(shown(f"{pause.job}: {pause.reason()}"))
    return 0


def _resume(console: ConsoleFacade, args: argparse.Namespace) -> int:
    ended = console.resume(args.job)
    if args.json:
        print(json.dumps(with_schema({"resumed": pause_json(ended)})))
    elif ended is None:
        print(shown(f"{args.job} was not paused; nothing changed"), file=sys.stderr)
    else:
        print(shown(f"{args.job}: resumed (it was {ended.reason()})"))
    return 0


EXIT_NO_RUN = 1


def _output(console: ConsoleFacade, args: argparse.Namespace) -> int:
    ledger, _, number = args.run_id.rpartition(":")
    if not number.isdigit() or not 0 < int(number) < 2**63:
        raise UsageError("output: RUN_ID is LEDGER:ID or ID, with ID a positive run id")
    run_id = int(number)
    found = console.run_output(run_id, ledger=ledger or None)
    if args.json:
        missing = {"run_id": run_id, "ledger": ledger or None}
        doc = missing if found is None else found.__dict__
        print(json.dumps(with_schema({"found": found is not None, **doc})))
        return 0 if found is not None else EXIT_NO_RUN
    if found is None:
        print(shown(f"lockconsole: no run {args.run_id} in the ledger"), file=sys.stderr)
        return EXIT_NO_RUN
    head = f"run {found.run_id} of {found.job}: {found.outcome}"
    print(shown(head if found.output else f"{head}, no output kept"), file=sys.stderr)
    for line in (found.output or "").splitlines():
        print(shown(line))
    return 0


EXIT_REQUEST = {"succeeded": 0, "skipped": 3, "paused": 3}  # anything else: 1
REQUEST_POLL = 0.2  # seconds between looks at the request while waiting for it


def _request(console: ConsoleFacade, args: argparse.Namespace) -> int:
    import time

    from lockconsole.cli.run import check_instance, parse_slot
    from lockconsole.config.checks import parse_duration

    slot = parse_slot(args.slot) if args.slot else None
    instance = None if args.instance is None else check_instance(args.instance, "")
    try:
        timeout = parse_duration(args.timeout)
    except ValueError as exc:
        raise UsageError(f"request: --timeout: {exc}") from None
    if timeout.total_seconds() <= 0:
        raise UsageError("request: --timeout must be positive")
    request_id = console.request(
        args.job, slot=slot, instance=instance, force=args.force, timeout=timeout
    )
    if args.no_wait:
        print(json.dumps(with_schema({"request": request_id})) if args.json else request_id)
        return 0
    seen: tuple[object, ...] | None = None
    if not args.json:  # what the row says as it is written; then each change as it is seen
        seen = ("queued", None, None)
        print(shown(f"request {request_id}: queued for {args.job}"), flush=True)
    while True:
        found = console.request_state(args.job, request_id)
        if found is None:
            raise UsageError(f"request {request_id} vanished from the ledger")
        shown_state = (found.state, found.served_by, found.run_id)
        if shown_state != seen and not args.json:
            seen = shown_state
            where = f" on {found.served_by}" if found.served_by else ""
            run = f" (run {found.run_id})" if found.run_id else ""
            why = f": {found.reason}" if found.reason and found.final else ""
            print(shown(f"request {request_id}: {found.state}{where}{run}{why}"), flush=True)
        if found.final:
            break
        time.sleep(REQUEST_POLL)
    if args.json:
        from dataclasses import asdict

        values = {
            k: v.isoformat() if isinstance(v, datetime) else v for k, v in asdict(found).items()
        }
        print(json.dumps(with_schema(values)))
    return EXIT_REQUEST.get(found.state, 1)
