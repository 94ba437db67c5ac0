"""Readable tables for the CLI views (rich; honours NO_COLOR and narrow terminals)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rich.console import Console as RichConsole
from rich.console import Group
from rich.table import Table

from lockconsole.model.jobs import Idempotency, Run
from lockconsole.model.views import Holder, Snapshot
from lockconsole.text.safe import data_text
from lockconsole.text.times import age, stamp, took

if TYPE_CHECKING:
    from lockconsole.backends.audit import AuditEntry
    from lockconsole.backends.duplicates import DuplicatePage, DuplicateSummary


class _TableConsole(RichConsole):
    """Rich's console, but a reader that went away raises BrokenPipeError for the CLI to end
    quietly with its own exit code (Rich itself exits 1 there)."""

    def on_broken_pipe(self) -> None:
        raise BrokenPipeError


# Piped output (grep, logs) is not cut to 80 columns; a terminal gets its own width.
# Nothing printed here is parsed as markup or emoji codes: every value is data (data_text).
out = _TableConsole(
    highlight=False, markup=False, emoji=False, width=None if sys.stdout.isatty() else 200
)
KEY_WIDTH = 64  # cells of a key, a name or a message shown before '…'
TEXT_WIDTH = 200  # cells of a query or a message


def holders_table(holders: Sequence[Holder], now: datetime, unread: Sequence[str] = ()) -> None:
    """The holders; `unread`: databases that could not be read (their holders are unknown)."""
    table = Table(title=f"lock holders at {stamp(now, zone=False)} UTC", title_justify="left")
    for col in (
        "database",
        "key",
        "job",
        "state",
        "pid",
        "user",
        "application",
        "since",
        "stale / notes",
    ):
        table.add_column(col, overflow="fold", no_wrap=col in ("pid", "since"))
    for h in holders:
        state = "held" if h.granted else f"WAITING on {','.join(map(str, h.blocked_by)) or '?'}"
        if h.state:
            state += f" ({h.state})"
        since = h.held_since or h.waiting_since or h.state_since
        note = h.stale or h.hidden or ""
        cells = (
            h.database,
            h.key,
            h.job or "(unmapped)",
            state,
            str(h.pid or h.locked_by or "-"),
            h.user or "-",
            h.instance or h.application_name or "-",
            ("≥" if h.granted and h.held_from == "at_least" else "") + age(since, now),
            note,
        )
        style = "red" if h.stale else ("yellow" if not h.granted else None)
        table.add_row(*(data_text(c, limit=KEY_WIDTH) for c in cells), style=style)
    if not holders:  # none seen is not none held where a database could not be read
        unknown = f"; unknown for {', '.join(unread)} (could not be read)" if unread else ""
        out.print(data_text(f"no lock holders seen{unknown}" if unread else "no lock holders"))
        return
    out.print(table)


def print_problems(snap: Snapshot) -> None:
    for db, source in snap.sources:
        out.print(data_text(f"{db}: read from {source}", style="dim"))
    for db, note in snap.notes:
        out.print(data_text(f"note: {db}: {note}"))
    for db, error in snap.errors:
        out.print(data_text(f"error: {db}: {error}", style="red"))


def runs_table(runs: Sequence[Run], ids: Sequence[str] | None = None) -> None:
    """The history table; `ids`: each run's id as `output` takes it (LEDGER:ID)."""
    if not runs:
        out.print("no runs recorded")
        return
    table = Table(title="run history (newest first; times UTC)", title_justify="left")
    ids = ids or [str(r.id) for r in runs]
    for col in (
        "id",
        "job",
        "slot",
        "instance",
        "trigger",
        "outcome",
        "started",
        "took",
        "exit",
        "message",
    ):
        table.add_column(col, overflow="fold")
    for r, run_id in zip(runs, ids, strict=True):
        length = took(r.finished_at - r.started_at) if r.finished_at else "running"
        style = {"failed": "red", "lock_lost": "red", "acquired": "cyan"}.get(r.outcome)
        slot, started = stamp(r.slot, zone=False), stamp(r.started_at, zone=False)
        cells = (
            run_id,
            r.job,
            slot,
            r.instance,
            r.trigger if r.actor is None else f"{r.trigger} by {r.actor}",
            r.outcome,
            started,
            length,
            "-" if r.exit_code is None else str(r.exit_code),
        )
        table.add_row(
            *(data_text(c, limit=KEY_WIDTH) for c in cells),
            data_text(r.message or "", limit=TEXT_WIDTH),
            style=style,
        )
    out.print(table)


def audit_table(entries: Sequence[AuditEntry]) -> None:
    if not entries:
        out.print("no audited actions")
        return
    table = Table(title="audit (newest first; times UTC)", title_justify="left")
    for col in ("at", "action", "job", "by", "database", "target", "result", "message"):
        table.add_column(col, overflow="fold", no_wrap=col == "at")
    for e in entries:
        cells = (
            stamp(e.at, zone=False),
            e.action,
            e.job or "-",
            f"{e.os_user}@{e.host}",
            e.database,
            e.target,
            e.result,
        )
        style = {"attempted": "yellow", "error": "red"}.get(e.result)
        table.add_row(
            *(data_text(c, limit=KEY_WIDTH) for c in cells),
            data_text(e.message or "", limit=TEXT_WIDTH),
            style=style,
        )
    out.print(table)


def rows_table(rows: Sequence[dict[str, Any]]) -> None:
    if not rows:
        out.print("no rows")
        return
    table = Table()
    for col in rows[0]:
        table.add_column(data_text(col, limit=KEY_WIDTH))
    for row in rows:
        table.add_row(*(data_text("" if v is None else v, limit=KEY_WIDTH) for v in row.values()))
    out.print(table)


def dupes_table(
    spec: Idempotency, summary: DuplicateSummary, page: DuplicatePage, ddl: str
) -> None:
    key = ", ".join(spec.key)
    out.print(
        data_text(
            f"{spec.table} ({key}): {summary.groups} duplicate groups, "
            f"{summary.surplus_rows} surplus rows"
        )
    )
    if page.groups:
        table = Table()
        table.add_column(data_text(key))
        table.add_column("rows", no_wrap=True)
        table.add_column("runs")
        for g in page.groups:
            table.add_row(
                data_text(", ".join(map(str, g.key)), limit=KEY_WIDTH),
                str(g.count),
                data_text(", ".join(map(str, g.run_ids))),
            )
        out.print(table)
        if page.has_more:
            out.print("more: --page N+1")
    out.print(data_text(f"fix: {ddl}") if "\n" not in ddl else _lines(f"fix: {ddl}"))


def _lines(text: str) -> Group:
    """Multi-line text (a note, then DDL): each line shown as data, the breaks kept."""
    return Group(*(data_text(line) for line in text.split("\n")))
