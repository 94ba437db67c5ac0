"""`lockconsole locks | history | audit | dupes | release | check`: the console's views as
commands.

Readable tables by default; `-o wide|json|tsv` and `--no-headers` for scripts (`--json` is
`-o json`). Every command goes through the Console
facade; `--read-only` refuses `release`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from lockconsole.cli.output import add_output_options, chosen, print_json, to_json
from lockconsole.model.errors import UsageError
from lockconsole.text.safe import shown

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import Holder

Command = Callable[["ConsoleFacade", argparse.Namespace], int]  # cmd_*: a view over the facade

EXIT_ALERTS = 1
EXIT_UNREAD = 5  # a database could not be read, as `run` says it
EXIT_NOT_RELEASED = 1


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("locks", help="who holds or waits for each lock, in every database")
    add_output_options(p, "print one JSON object")
    p.add_argument("--job", metavar="NAME", help="only this job's holders")

    h = sub.add_parser("history", help="recent attempts on every instance, newest first")
    h.add_argument("--job", metavar="NAME", help="only this job")
    h.add_argument("--instance", metavar="NAME", help="only this instance's attempts")
    h.add_argument("--outcome", choices=OUTCOMES, help="only attempts that ended so")
    h.add_argument("--since", metavar="WHEN", help="started since: a duration (2h) or ISO time")
    h.add_argument("--until", metavar="WHEN", help="started before: a duration ago or ISO time")
    h.add_argument("--slot", metavar="ISO_TIME", help="only this slot's attempts")
    h.add_argument("--limit", type=int, default=50, metavar="N", help="how many (default 50)")
    add_output_options(h, "print one JSON object")

    a = sub.add_parser("audit", help="force-releases and triggers: who, when, what, the result")
    a.add_argument("--job", metavar="NAME", help="only this job's")
    a.add_argument("--since", metavar="DURATION", help="only this recent (e.g. 2h, 30m, 1d)")
    a.add_argument("--limit", type=int, default=200, metavar="N", help="how many (default 200)")
    add_output_options(a, "print one JSON object")

    d = sub.add_parser("dupes", help="duplicate keys in a job's idempotency table")
    d.add_argument("job", help="the job whose idempotency table to inspect")
    d.add_argument("--page", type=int, default=0, metavar="N", help="page number (from 0)")
    d.add_argument("--page-size", type=int, default=50, metavar="N", help="groups per page")
    d.add_argument("--group", nargs="+", metavar="VALUE", help="show the rows of this key")
    d.add_argument("--csv", metavar="FILE", help="export every duplicate row to FILE")
    add_output_options(d, "print one JSON object")

    r = sub.add_parser("release", help="force-release a lock holder (ends its session)")
    which = r.add_mutually_exclusive_group(required=True)
    which.add_argument("--pid", type=int, help="the holding session's pid / connection id")
    which.add_argument("--job", metavar="NAME", help="the holder of this job's lock")
    r.add_argument("--database", metavar="NAME", help="where the pid is (if several)")
    r.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    r.add_argument("--json", action="store_true", help="print the result as JSON")

    c = sub.add_parser("check", help="print alerts; exit 1 if there are any (for monitoring)")
    add_output_options(c, "print one JSON object")
    c.add_argument("--no-duplicates", action="store_true", help="skip the idempotency scans")
    for parser, command in (
        (p, cmd_locks),
        (h, cmd_history),
        (a, cmd_audit),
        (d, cmd_dupes),
        (r, cmd_release),
        (c, cmd_check),
    ):
        parser.set_defaults(handler=partial(view, command))


def view(command: Command, args: argparse.Namespace) -> int:
    """Run one view over a console of the config of `args`."""
    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    config = load_config(args.config)
    if any(db.url.dialect == "redis" for db in config.databases.values()):
        from lockconsole.backends.redis.lock import redis_client_module

        redis_client_module()  # a missing extra is said before anything is read: exit 2
    with Console(config, read_only=args.read_only) as console:
        return command(console, args)


MAX_LIMIT = 100_000
OUTCOMES = ("skipped", "paused", "acquired", "succeeded", "failed", "lock_lost")
MAX_ID = 2**63 - 1


def cmd_locks(console: ConsoleFacade, args: argparse.Namespace) -> int:
    if args.job is not None:
        console.config.job(args.job)  # an unknown job is an error, not an empty list
    snap = console.snapshot(duplicates=False)
    holders = [h for h in snap.holders if args.job is None or h.job == args.job]
    fmt = chosen(args)
    if fmt == "json":
        print_json(
            {
                "taken_at": snap.taken_at,
                "holders": holders,
                "sources": dict(snap.sources),
                "notes": [list(n) for n in snap.notes],
                "errors": dict(snap.errors),
            }
        )
        return EXIT_UNREAD if snap.errors else 0
    from lockconsole.cli import listings
    from lockconsole.cli.tables import show

    unread = [db for db, _ in snap.errors]
    show(listings.holders(holders, snap.taken_at, unread, snap), fmt, no_headers=args.no_headers)
    return EXIT_UNREAD if snap.errors else 0  # the list is incomplete: never an all clear


def cmd_audit(console: ConsoleFacade, args: argparse.Namespace) -> int:
    """Every audited force-release and trigger; exit 1 when a database could not be read."""
    from lockconsole.config.checks import parse_duration
    from lockconsole.model.slots import utcnow

    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"audit: --limit must be at least 1 and at most {MAX_LIMIT}")
    since = None
    if args.since is not None:
        try:
            since = utcnow() - parse_duration(args.since)
        except ValueError as exc:
            raise UsageError(f"audit: --since: {exc}") from None
    entries, errors = console.audit(args.job, since=since, limit=args.limit)
    fmt = chosen(args)
    if fmt == "json":
        print_json({"entries": entries, "errors": dict(errors)})
    else:
        from lockconsole.cli import listings
        from lockconsole.cli.tables import show

        show(listings.audit(entries, errors), fmt, no_headers=args.no_headers)
    return EXIT_UNREAD if errors else 0


def moment(option: str, text: str | None, command: str = "history") -> datetime | None:
    """--since / --until / --at: a duration ago (2h, 30m, 1d) or an ISO time with a zone."""
    from lockconsole.config.checks import parse_duration
    from lockconsole.model.slots import utcnow

    if text is None:
        return None
    try:
        return utcnow() - parse_duration(text)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(
            f"{command}: {option}: {text!r} is neither a duration (2h) nor an ISO time"
        ) from None
    if value.tzinfo is None:
        raise UsageError(f"{command}: {option}: {text!r} has no time zone (add Z or +00:00)")
    return value


def cmd_history(console: ConsoleFacade, args: argparse.Namespace) -> int:
    from lockconsole.cli.run import parse_slot
    from lockconsole.model.context import qualified_run_id
    from lockconsole.model.views import RunFilter

    if not 1 <= args.limit <= MAX_LIMIT:
        raise UsageError(f"history: --limit must be at least 1 and at most {MAX_LIMIT}")
    if args.job is not None:
        console.config.job(args.job)  # an unknown job is an error, not an empty list
    where = RunFilter(
        instance=args.instance,
        outcome=args.outcome,
        since=moment("--since", args.since),
        until=moment("--until", args.until),
        slot=None if args.slot is None else parse_slot(args.slot),
    )
    runs = console.history(args.job, limit=args.limit, where=where)
    jobs = console.config.jobs

    def ledger_of(job: str) -> str | None:  # run ids are per ledger: each is shown with its own
        return console.config.ledger_for(jobs[job]).name if job in jobs else None

    fmt = chosen(args)
    if fmt == "json":
        rows = [
            {
                **to_json(r),
                "ledger": ledger_of(r.job),
                "run_id": qualified_run_id(ledger_of(r.job) or "?", r.id),
            }
            for r in runs
        ]
        print_json({"runs": rows})
        return 0
    from lockconsole.cli import listings
    from lockconsole.cli.tables import show

    ids = [qualified_run_id(ledger_of(r.job) or "?", r.id) or "-" for r in runs]
    show(listings.runs(runs, ids), fmt, no_headers=args.no_headers)
    return 0


def cmd_dupes(console: ConsoleFacade, args: argparse.Namespace) -> int:
    if args.page < 0 or args.page_size < 1:
        raise UsageError("dupes: --page must be >= 0 and --page-size >= 1")
    spec = console.config.job(args.job).idempotency
    if spec is None:
        raise UsageError(f"dupes: job {args.job!r} has no idempotency table configured")
    fmt = chosen(args)
    from lockconsole.cli import listings
    from lockconsole.cli.tables import say, say_lines, show

    if args.group is not None:
        if len(args.group) != len(spec.key):
            raise UsageError(f"dupes: --group takes {len(spec.key)} values ({', '.join(spec.key)})")
        rows = console.duplicate_rows(args.job, tuple(args.group))
        if fmt == "json":
            print_json({"key": args.group, "rows": rows})
        else:
            show(listings.table_rows(rows), fmt, no_headers=args.no_headers)
        return 0
    if args.csv:
        count = console.export_duplicates(args.job, args.csv)
        print(f"exported {count} duplicate rows to {args.csv}", file=sys.stderr)
    summary = console.duplicate_summary(args.job)
    page = console.duplicates(args.job, page=args.page, page_size=args.page_size)
    ddl = console.duplicate_ddl(args.job)
    if fmt == "json":
        print_json(
            {
                "job": args.job,
                "table": spec.table,
                "key": list(spec.key),
                "summary": summary,
                "page": args.page,
                "groups": page.groups,
                "has_more": page.has_more,
                "ddl": ddl,
            }
        )
        return 0
    tsv = fmt == "tsv"
    key = ", ".join(spec.key)
    counts = f"{summary.groups} duplicate groups, {summary.surplus_rows} surplus rows"
    say(f"{spec.table} ({key}): {counts}", tsv=tsv)
    show(listings.duplicate_groups(spec, page), fmt, no_headers=args.no_headers)
    if page.has_more:
        say("more: --page N+1", tsv=tsv)
    say_lines(f"fix: {ddl}", tsv=tsv)
    return 0


def cmd_release(console: ConsoleFacade, args: argparse.Namespace) -> int:
    from lockconsole.console.protocol import ReadOnlyError

    if console.read_only:
        raise ReadOnlyError("release refused: --read-only is set")
    if args.pid is not None and not 0 < args.pid <= MAX_ID:
        raise UsageError("release: --pid must be a positive process or connection id")
    holders = console.find_holders(pid=args.pid, job=args.job, database=args.database)
    what = f"pid {args.pid}" if args.pid is not None else f"job {args.job}"
    if not holders:
        print(
            f"lockconsole: no granted lock holder matches {what}; nothing was done", file=sys.stderr
        )
        return EXIT_NOT_RELEASED
    if len({(h.database, h.pid, h.key) for h in holders}) > 1 and args.pid is None:
        raise UsageError(f"release: {what} has several holders; choose one with --pid")
    target = holders[0]
    if not args.yes and not _confirm(target):
        print("lockconsole: not confirmed; nothing was done", file=sys.stderr)
        return EXIT_NOT_RELEASED
    result = console.release(target)
    if args.json:
        print_json(result)
    else:
        print(shown(f"{result.status}: {result.message}"))
    return 0 if result.status == "released" else EXIT_NOT_RELEASED


def cmd_check(console: ConsoleFacade, args: argparse.Namespace) -> int:
    snap = console.snapshot(duplicates=not args.no_duplicates)
    problems = list(snap.alerts)
    fmt = chosen(args)
    if fmt == "json":
        notes = [list(n) for n in snap.notes]
        print_json(
            {
                "taken_at": snap.taken_at,
                "alerts": problems,
                "errors": dict(snap.errors),
                "notes": notes,
            }
        )
    else:
        from lockconsole.cli import listings
        from lockconsole.cli.tables import show

        show(listings.alerts(snap, problems), fmt, no_headers=args.no_headers)
    # a database not read is unknown (5) rather than an alert: a monitor tells the two apart
    return EXIT_UNREAD if snap.errors else (EXIT_ALERTS if problems else 0)


def _confirm(holder: Holder) -> bool:
    if not sys.stdin.isatty():
        raise UsageError("release: no terminal to confirm on; add --yes")
    expected = holder.job or holder.key
    print(
        shown(
            f"About to end {holder.database} pid {holder.pid} holding {holder.key}"
            f" ({holder.job or 'unmapped'}), user {holder.user}, application "
            f"{holder.application_name}."
        )
    )
    answer = input(f"Type {shown(expected)!r} to confirm: ").strip()
    # a key with control characters is typed as it is shown (escaped)
    return answer in (str(expected), shown(expected))
