"""`lockconsole holders --at` and `lockconsole story`: what happened, for an incident.

`holders --at TIME` says who held which lock at that moment, from the holder journal, with the
uncertainty of sampling. `story JOB SLOT` tells one slot's account: text for a terminal,
`--format markdown` for a postmortem (a table per part, times in UTC and in the console's zone),
`--json` with every value exact. Untrusted text stays literal in every format: control
characters escaped, markdown's own characters escaped in markdown.
"""

from __future__ import annotations

import argparse
from datetime import datetime, tzinfo
from functools import partial
from typing import TYPE_CHECKING

from lockconsole.cli.output import add_output_options, chosen, print_json
from lockconsole.model.errors import UsageError
from lockconsole.text.safe import markdown_cell, shown
from lockconsole.text.times import stamp, zone_label

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade
    from lockconsole.model.views import JournalEntry, SlotStory

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


def _moment(text: str) -> datetime:
    from lockconsole.config.checks import parse_duration
    from lockconsole.model.slots import utcnow

    try:
        return utcnow() - parse_duration(text)
    except ValueError:
        pass
    try:
        value = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"holders: --at: {text!r} is neither an ISO time nor a duration") from None
    if value.tzinfo is None:
        raise UsageError(f"holders: --at: {text!r} has no time zone (add Z or +00:00)")
    return value


def certainty(entry: JournalEntry, at: datetime) -> str:
    """'held' when a sample saw it held then; 'maybe' when `at` falls only in its bounds."""
    last = entry.last_seen
    if entry.first_seen <= at and (last is None and entry.gone_by is None or last and at <= last):
        return "held"
    return "maybe"


def cmd_holders(console: ConsoleFacade, args: argparse.Namespace) -> int:
    at = _moment(args.at)
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
    elif args.format == "markdown":
        print(markdown(story, zone_named(console.config.console.timezone)), end="")
    else:
        print(text(story, zone_named(console.config.console.timezone)), end="")
    return EXIT_UNREAD if story.unknown else 0


def text(story: SlotStory, zone: tzinfo | None) -> str:
    """The story for a terminal: every line escaped."""
    head = f"{story.job} {stamp(story.slot)}  (ledger {story.ledger})"
    lines = [head, ""]
    for ev in story.events:
        when = stamp(ev.at, ms=True, zone=False, tz=zone)
        lines.append(f"{when}  {ev.source:<8} {ev.who:<24} {ev.what}")
    if story.outputs:
        lines.append("")
        for run_id, out in story.outputs:
            lines.append(f"output of run {run_id}:")
            lines += [f"  {line}" for line in out.splitlines()[-10:]]
    if story.alerts:
        lines.append("")
        lines += [f"alert [{a.kind}] {a.message}" for a in story.alerts]
    if story.duplicates:
        surplus = sum(g.count - 1 for g in story.duplicates)
        lines.append("")
        lines.append(
            f"duplicate keys carrying its run ids: {len(story.duplicates)} ({surplus} surplus rows)"
        )
        lines += [
            f"  {', '.join(map(str, g.key))}: {g.count} rows, runs {', '.join(map(str, g.run_ids))}"
            for g in story.duplicates[:10]
        ]
    for part, why in story.unknown:
        lines.append(f"unknown: {part}: {why}")
    lines += ["", f"verdict: {story.verdict}", ""]
    lines.insert(1, f"times in {zone_label(zone)}")
    return "\n".join(shown(line) for line in lines) + "\n"


def markdown(story: SlotStory, zone: tzinfo | None) -> str:
    """The story for a postmortem: a table per part, times in UTC and in the console's zone."""
    local = zone_label(zone)
    m = markdown_cell

    def both(value: datetime | None) -> str:
        if value is None:
            return "—"
        utc = stamp(value, ms=True, zone=False)
        if local == "UTC":
            return utc
        return f"{utc} ({stamp(value, ms=True, zone=False, tz=zone)} {local})"

    out = [f"# {m(story.job)}, slot {stamp(story.slot)}", ""]
    out += [f"**Verdict:** {m(story.verdict)}", ""]
    times = "UTC" if local == "UTC" else f"UTC ({local})"
    out += ["## Timeline", "", f"| time, {times} | source | who | what |", "|---|---|---|---|"]
    out += [f"| {both(e.at)} | {m(e.source)} | {m(e.who)} | {m(e.what)} |" for e in story.events]
    out += ["", "## Attempts", ""]
    out += ["| run | instance | outcome | started | finished | exit | message |"]
    out += ["|---|---|---|---|---|---|---|"]
    for r in story.attempts:
        code = "" if r.exit_code is None else str(r.exit_code)
        out.append(
            f"| {story.ledger}:{r.id} | {m(r.instance)} | {m(r.outcome)} | {both(r.started_at)} "
            f"| {both(r.finished_at)} | {code} | {m(r.message or '')} |"
        )
    out += ["", "## Holders seen", ""]
    if story.holders:
        out += ["| who | key | first seen | last seen | gone by |", "|---|---|---|---|---|"]
        from lockconsole.model.story import holder_name

        out += [
            f"| {m(holder_name(h))} | {m(h.key)} | {both(h.first_seen)} | {both(h.last_seen)} "
            f"| {both(h.gone_by)} |"
            for h in story.holders
        ]
    else:
        out.append("None in the holder journal.")
    out += ["", "## Audit", ""]
    if story.audit:
        out += ["| time | who | action | target | result |", "|---|---|---|---|---|"]
        out += [
            f"| {both(e.at)} | {m(e.os_user)}@{m(e.host)} | {m(e.action)} | {m(e.target)} "
            f"| {m(e.result)} |"
            for e in story.audit
        ]
    else:
        out.append("No audited action in the window.")
    out += ["", "## Alerts", ""]
    out += [f"- **{m(a.kind)}**: {m(a.message)}" for a in story.alerts] or ["None."]
    if story.duplicates:
        out += ["", "## Duplicate keys carrying its run ids", ""]
        out += ["| key | rows | run ids |", "|---|---|---|"]
        out += [
            f"| {m(', '.join(map(str, g.key)))} | {g.count} | {m(', '.join(map(str, g.run_ids)))} |"
            for g in story.duplicates
        ]
    if story.outputs:
        out += ["", "## Output tails", ""]
        for run_id, tail in story.outputs:
            out += [f"Run {story.ledger}:{run_id}:", ""]
            out += [f"    {m(line, table=False)}" for line in tail.splitlines()[-20:]]
            out.append("")
    if story.unknown:
        out += ["", "## Could not be read", ""]
        out += [f"- {m(part)}: {m(why)}" for part, why in story.unknown]
    return "\n".join(out).rstrip("\n") + "\n"
