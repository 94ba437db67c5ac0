"""What each listing command shows, as columns and rows of text (`columns.Listing`).

Each column says whether it is free text (cut with '…' when the width is short) or a value that
means something (a time, a duration, an id, a status: never cut), whether only `-o wide` shows
it, and how early it is left out of a narrow view. Values stay raw here; `tables` escapes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockconsole.cli.columns import Column, Listing, Row
from lockconsole.text.times import age, stamp, took

if TYPE_CHECKING:
    from lockconsole.backends.audit import AuditEntry
    from lockconsole.backends.duplicates import DuplicatePage
    from lockconsole.model.jobs import Idempotency, Run
    from lockconsole.model.views import Alert, Holder, JournalEntry, Snapshot

TEXT_WIDTH = 200  # cells of a message at most in a table (other free text: 64)
KEY_LEAST = 20  # a lock key keeps this many cells: every int64 key is shown whole

HOLDER_COLUMNS = (
    Column("DATABASE", cut=True, rank=2),
    Column("KEY", cut=True, least=KEY_LEAST),
    Column("JOB", cut=True),
    Column("STATE"),
    Column("PID"),
    Column("SINCE"),
    Column("NOTES", cut=True, rank=1),
    Column("USER", cut=True, wide=True, rank=3),
    Column("APPLICATION", cut=True, wide=True, rank=3),
    Column("CLIENT", cut=True, wide=True, rank=4),
    Column("SOURCE", wide=True, rank=4),
)


def holders(
    found: Sequence[Holder], now: datetime, unread: Sequence[str], snap: Snapshot
) -> Listing:
    """The lock holders; `unread`: databases that could not be read (their holders unknown)."""
    rows = []
    for h in found:
        state = "held" if h.granted else f"WAITING on {','.join(map(str, h.blocked_by)) or '?'}"
        if h.state:
            state += f" ({h.state})"
        since = h.held_since or h.waiting_since or h.state_since
        cells = (
            h.database,
            h.key,
            h.job or "(unmapped)",
            state,
            str(h.pid or h.locked_by or "-"),
            ("≥" if h.granted and h.held_from == "at_least" else "") + age(since, now),
            h.stale or h.hidden or "",
            h.user or "-",
            h.instance or h.application_name or "-",
            h.client_addr or "-",
            h.source,
        )
        style = "red" if h.stale else ("yellow" if not h.granted else None)
        rows.append(Row(cells, style))
    unknown = f"; unknown for {', '.join(unread)} (could not be read)" if unread else ""
    return Listing(
        f"lock holders at {stamp(now, zone=False)} UTC",
        HOLDER_COLUMNS,
        tuple(rows),
        f"no lock holders seen{unknown}" if unread else "no lock holders",
        problems(snap),
    )


def problems(snap: Snapshot) -> tuple[str, ...]:
    """Where each database was read from, its notes, and the databases that failed."""
    return (
        *(f"{db}: read from {source}" for db, source in snap.sources),
        *(f"note: {db}: {note}" for db, note in snap.notes),
        *(f"error: {db}: {error}" for db, error in snap.errors),
    )


RUN_COLUMNS = (
    Column("ID"),
    Column("JOB", cut=True),
    Column("SLOT"),
    Column("INSTANCE", cut=True, rank=2),
    Column("OUTCOME"),
    Column("TOOK"),
    Column("MESSAGE", cut=True, rank=1, most=TEXT_WIDTH),
    Column("TRIGGER", cut=True, wide=True, rank=3),
    Column("STARTED", wide=True, rank=3),
    Column("EXIT", wide=True, rank=3),
)


def runs(found: Sequence[Run], ids: Sequence[str]) -> Listing:
    """The run history; `ids`: each run's id as `output` takes it (LEDGER:ID)."""
    rows = []
    for r, run_id in zip(found, ids, strict=True):
        length = took(r.finished_at - r.started_at) if r.finished_at else "running"
        cells = (
            run_id,
            r.job,
            stamp(r.slot, zone=False),
            r.instance,
            r.outcome,
            length,
            r.message or "",
            r.trigger if r.actor is None else f"{r.trigger} by {r.actor}",
            stamp(r.started_at, zone=False),
            "-" if r.exit_code is None else str(r.exit_code),
        )
        style = {"failed": "red", "lock_lost": "red", "acquired": "cyan"}.get(r.outcome)
        rows.append(Row(cells, style))
    return Listing(
        "run history (newest first; times UTC)", RUN_COLUMNS, tuple(rows), "no runs recorded"
    )


AUDIT_COLUMNS = (
    Column("AT"),
    Column("ACTION"),
    Column("JOB", cut=True),
    Column("RESULT"),
    Column("MESSAGE", cut=True, rank=1, most=TEXT_WIDTH),
    Column("BY", cut=True, wide=True, rank=2),
    Column("DATABASE", cut=True, wide=True, rank=2),
    Column("TARGET", cut=True, wide=True, rank=3),
    Column("ID", wide=True, rank=3),
)


def audit(entries: Sequence[AuditEntry], errors: Sequence[tuple[str, str]]) -> Listing:
    rows = []
    for e in entries:
        cells = (
            stamp(e.at, zone=False),
            e.action,
            e.job or "-",
            e.result,
            e.message or "",
            f"{e.os_user}@{e.host}",
            e.database,
            e.target,
            str(e.id),
        )
        rows.append(Row(cells, {"attempted": "yellow", "error": "red"}.get(e.result)))
    return Listing(
        "audit (newest first; times UTC)",
        AUDIT_COLUMNS,
        tuple(rows),
        "no audited actions",
        tuple(f"error: {db}: {error}" for db, error in errors),
    )


ALERT_COLUMNS = (
    Column("KIND"),
    Column("JOB", cut=True),
    Column("MESSAGE", cut=True, most=TEXT_WIDTH),
    Column("SLOT", wide=True, rank=1),
    Column("DATABASE", cut=True, wide=True, rank=1),
)


def alerts(snap: Snapshot, found: Sequence[Alert]) -> Listing:
    """`check`: each alert, each database that could not be read, each note; a row apiece."""
    rows = [
        Row(
            (
                a.kind,
                a.job or "-",
                a.message,
                stamp(a.slot, zone=False) if a.slot else "-",
                a.database or "-",
            ),
            "red",
        )
        for a in found
    ]
    for db, error in snap.errors:
        rows.append(Row(("database_error", "-", f"{db}: {error}", "-", db), "red"))
    for db, note in snap.notes:
        rows.append(Row(("note", "-", f"{db}: {note}", "-", db)))
    return Listing("alerts", ALERT_COLUMNS, tuple(rows), "ok: no alerts")


def duplicate_groups(spec: Idempotency, page: DuplicatePage) -> Listing:
    """One page of an idempotency table's duplicate groups."""
    columns = (
        Column(", ".join(spec.key).upper(), cut=True),
        Column("ROWS"),
        Column("RUNS", cut=True),
    )
    rows = tuple(
        Row((", ".join(map(str, g.key)), str(g.count), ", ".join(map(str, g.run_ids))))
        for g in page.groups
    )
    return Listing(f"duplicates in {spec.table}", columns, rows, "no duplicate groups")


def table_rows(found: Sequence[dict[str, Any]]) -> Listing:
    """Rows of a table as the database gave them (`dupes --group`): every column free text."""
    names = tuple(found[0]) if found else ()
    columns = tuple(Column(str(n), cut=True) for n in names)
    rows = tuple(Row(tuple("" if v is None else str(v) for v in r.values())) for r in found)
    return Listing("rows", columns, rows, "no rows")


JOURNAL_COLUMNS = (
    Column("HELD"),
    Column("DATABASE", cut=True, rank=2),
    Column("KEY", cut=True, least=KEY_LEAST),
    Column("JOB", cut=True),
    Column("PID"),
    Column("SEEN"),
    Column("AT MOST"),
    Column("APPLICATION", cut=True, rank=1),
    Column("CLIENT", cut=True, wide=True, rank=3),
    Column("USER", cut=True, wide=True, rank=3),
    Column("MODE", wide=True, rank=4),
)


def journal(
    entries: Sequence[tuple[str, JournalEntry]], at: datetime, errors: Sequence[tuple[str, str]]
) -> Listing:
    """`holders --at`: each holding the journal may have seen then, `held` or `maybe`."""

    def t(value: datetime | None) -> str:
        return "now" if value is None else stamp(value, zone=False).split(" ")[1]

    rows = []
    for held, e in entries:
        last = e.last_seen if e.gone_by is not None else None
        cells = (
            held,
            e.database,
            e.key,
            e.job or "-",
            "-" if e.pid is None else str(e.pid),
            f"{t(e.first_seen)}–{t(last)}",
            f"{t(e.earliest)}–{t(e.gone_by)}",
            e.application or e.locked_by or "-",
            e.client or "-",
            e.user or "-",
            e.mode or "-",
        )
        rows.append(Row(cells, None if held == "held" else "yellow"))
    return Listing(
        f"holders at {stamp(at, ms=True)} (held: a sample saw it then; maybe: between samples;"
        " times UTC)",
        JOURNAL_COLUMNS,
        tuple(rows),
        f"no holder in the journal at {stamp(at, ms=True)}",
        tuple(f"unknown: {db}: {error}" for db, error in errors),
    )
