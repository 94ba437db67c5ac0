"""A slot's story as text: for a terminal (every line escaped) and as markdown for a postmortem
(a table per part, times in UTC and in the console's zone, data escaped for markdown)."""

from __future__ import annotations

from datetime import datetime, tzinfo

from lockconsole.model.story import holder_name
from lockconsole.model.views import SlotStory
from lockconsole.text.safe import markdown_cell, shown
from lockconsole.text.times import stamp, zone_label


def story_text(story: SlotStory, zone: tzinfo | None) -> str:
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


def story_markdown(story: SlotStory, zone: tzinfo | None) -> str:
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
    out += _table(
        "Attempts",
        ("run", "instance", "outcome", "started", "finished", "exit", "message"),
        [
            (
                m(f"{story.ledger}:{r.id}"),
                m(r.instance),
                m(r.outcome),
                both(r.started_at),
                both(r.finished_at),
                "" if r.exit_code is None else str(r.exit_code),
                m(r.message or ""),
            )
            for r in story.attempts
        ],  # fmt: skip
        "No attempt in the ledger.",
    )
    out += _table(
        "Holders seen",
        ("who", "key", "first seen", "last seen", "gone by"),
        [
            (m(holder_name(h)), m(h.key), both(h.first_seen), both(h.last_seen), both(h.gone_by))
            for h in story.holders
        ],
        "None in the holder journal.",
    )
    out += _table(
        "Audit",
        ("time", "who", "action", "target", "result"),
        [
            (both(e.at), f"{m(e.os_user)}@{m(e.host)}", m(e.action), m(e.target), m(e.result))
            for e in story.audit
        ],
        "No audited action in the window.",
    )
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


def _table(
    title: str, headers: tuple[str, ...], rows: list[tuple[str, ...]], empty: str
) -> list[str]:
    """A markdown section: its title, then a table of `rows` (cells already escaped) or `empty`."""
    out = ["", f"## {title}", ""]
    if not rows:
        return [*out, empty]
    out += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(row) + " |" for row in rows]
