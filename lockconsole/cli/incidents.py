"""`lockconsole holders --at` and `lockconsole story`: what happened, for an incident.

`holders --at TIME` says who held which lock at that moment, from the holder journal, with the
uncertainty of sampling. `story JOB SLOT` tells one slot's account: text for a terminal,
`--format markdown` for a postmortem (a table per part, times in UTC and in the console's zone),
`--json` with every value exact. Untrusted text stays literal in every format: control
characters escaped, markdown's own characters escaped in markdown.
"""

from __future__ import annotations

import argparse
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING

from lockconsole.cli.output import add_output_options, chosen, print_json

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import JournalEntry

EXIT_UNREAD = 5  # a source could not be read, as every command says it


def add_parsers(sub: argparse._SubParsersAction) -> None:
    from lockconsole.cli.views import view

    h = sub.add_parser(
        "holders",
        help="who held which lock at a moment, from the holder journal",
        description="Who held which lock at TIME, as the holder journal's samplers saw it: "
        "'held' when a sample showed it then, 'maybe' when TIME falls between the sample "
        "before it appeared (or its session's start) and the first sample without it.",
    )
    h.add_argument("--at", required=True, metavar="TIME", help="an ISO time, or a duration ago")
    which = h.add_mutually_exclusive_group()
    which.add_argument("--key", metavar="KEY", help="only this lock key, as locks shows it")
    which.add_argument("--job", metavar="NAME", help="only the holders of this job's lock")
    add_output_options(h, "print one JSON object")
    h.set_defaults(handler=partial(view, cmd_holders))

    s = sub.add_parser(
        "story",
        help="the story of one slot of a job: attempts, holders, audit, alerts, verdict",
    )
    s.add_argument("job", help="the job")
    s.add_argument("slot", help="the slot, an ISO time with a zone (as history shows it)")
    s.add_argument(
        "--format", choices=("text", "markdown"), default="text", help="text, or markdown"
    )
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.set_defaults(handler=partial(view, cmd_story))


def certainty(entry: JournalEntry, at: datetime) -> str:
    """'held' when a sample saw it held then; 'maybe' when `at` falls only in its bounds."""
    last = entry.last_seen
    if entry.first_seen <= at and (last is None and entry.gone_by is None or last and at <= last):
        return "held"
    return "maybe"


def cmd_holders(console: ConsoleFacade, args: argparse.Namespace) -> int:
    from lockconsole.cli.views import moment

    at = moment("--at", args.at, "holders")
    assert at is not None  # --at is required
    if args.job is not None:
        console.config.job(args.job)
    found, errors = console.holders_at(at, key=args.key, job=args.job)
    fmt = chosen(args)
    if fmt == "json":
        print_json(
            {
                "at": at,
                "holders": [{**_entry_json(e), "certainty": certainty(e, at)} for e in found],
                "errors": dict(errors),
            }
        )
        return EXIT_UNREAD if errors else 0
    from lockconsole.cli import listings, tables

    rows = [(certainty(e, at), e) for e in found]
    tables.show(listings.journal(rows, at, errors), fmt, no_headers=args.no_headers)
    return EXIT_UNREAD if errors else 0


def _entry_json(entry: JournalEntry) -> dict[str, object]:
    from lockconsole.cli.output import to_json

    data = to_json(entry)
    assert isinstance(data, dict)
    return data


def cmd_story(console: ConsoleFacade, args: argparse.Namespace) -> int:
    from lockconsole.cli.run import parse_slot
    from lockconsole.config.checks import zone_named

    console.config.job(args.job)
    story = console.story(args.job, parse_slot(args.slot))
    if args.json:
        from lockconsole.model.story import story_dict

        print_json(story_dict(story))
    else:
        from lockconsole.text.story import story_markdown, story_text

        zone = zone_named(console.config.console.timezone)
        tell = story_markdown if args.format == "markdown" else story_text
        print(tell(story, zone), end="")
    return EXIT_UNREAD if story.unknown else 0
