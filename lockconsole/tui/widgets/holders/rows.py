"""The holders view's rows, laid out from an immutable snapshot (pure: no Textual, no I/O).

`layout(holders, group_by, text_filter, sort, zone)` groups the holders by job or by session, sorts
them, marks waiters, stale holders and unmapped keys, and says who blocks whom. It runs in
the refresh worker, so the UI thread only swaps the result in and paints the visible rows.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Literal

from lockconsole.model.views import Holder
from lockconsole.text.safe import shown
from lockconsole.text.times import clock
from lockconsole.tui.older_runs import parse_filter

GroupBy = Literal["job", "session"]
Flag = Literal["header", "held", "waiting", "stale", "unmapped"]

# Every cell a row has, in this order; the view shows the columns of its grouping (the
# group header already names the job, or the session) and fills the age at paint time.
FIELDS = ("STATE", "JOB", "KEY", "PID", "FOR", "WHO", "NOTE", "DATABASE")
# The widest each column may grow to (terminal cells; a longer cell ends in '…'): a column is
# as wide as its widest cell on every refresh, at least its heading, at most this.
MAX_WIDTHS = {
    "STATE": 10,
    "JOB": 28,
    "KEY": 28,
    "PID": 10,
    "FOR": 7,
    "WHO": 32,
    "NOTE": 160,
    "DATABASE": 16,
}
COLUMNS: dict[str, tuple[str, ...]] = {
    "job": ("STATE", "KEY", "PID", "FOR", "WHO", "NOTE", "DATABASE"),
    "session": ("STATE", "JOB", "KEY", "FOR", "NOTE", "DATABASE"),
}
# The identifying columns: they stay in place when the view scrolls sideways.
FIXED = {"job": 3, "session": 3}
AGE_FIELD = FIELDS.index("FOR")
UNMAPPED = "(unmapped)"
SortBy = tuple[str, bool] | None  # (field, descending), or the natural order
# The columns the sort key sorts descending on its first press: the longest held first.
FIRST_DESCENDING = frozenset({"FOR"})


@dataclass(frozen=True)
class HolderRow:
    key: tuple[object, ...]  # stable identity of the row across refreshes
    flag: Flag
    cells: tuple[str, ...]  # every column; the age cell is a placeholder
    since: datetime | None = None  # held or waiting since: the age column
    holder: Holder | None = None  # None for a group header
    at_least: bool = False  # `since` is a lower bound of the time held: FOR reads "≥4m12s"


@dataclass(frozen=True)
class HolderRows:
    rows: tuple[HolderRow, ...] = ()
    index: Mapping[tuple[object, ...], int] = field(default_factory=dict)
    group_by: GroupBy = "job"
    text_filter: str = ""
    widths: Mapping[str, int] = field(default_factory=dict)  # field -> cells, from the data
    sort: SortBy = None
    total: int = 0  # holders before filtering
    shown: int = 0  # holders after filtering
    waiting: int = 0
    stale: int = 0
    unmapped: int = 0


def holder_key(h: Holder) -> tuple[object, ...]:
    return ("h", h.database, h.kind, h.source, h.key, h.pid, h.locked_by, h.granted, h.mode)


def _flag(h: Holder) -> Flag:
    if not h.granted:
        return "waiting"
    if h.stale:
        return "stale"
    if h.job is None:
        return "unmapped"
    return "held"


def _who(h: Holder) -> str:
    who = h.instance or h.application_name or h.locked_by or h.user or "?"
    return f"{who} {h.client_addr}" if h.client_addr else who


def _note(h: Holder, blocks: Mapping[tuple[str, int], list[int]], zone: tzinfo | None) -> str:
    parts = []
    if not h.granted:
        by = ",".join(map(str, h.blocked_by)) or "?"
        parts.append(f"blocked by {by}")
    if h.pid is not None and (h.database, h.pid) in blocks and h.granted:
        waiters = blocks[(h.database, h.pid)]
        parts.append(
            f"blocks {','.join(map(str, waiters[:5]))}" + (" …" if len(waiters) > 5 else "")
        )
    if h.stale:
        parts.append(f"STALE: {h.stale}")
    if h.job is None:
        parts.append("UNMAPPED key: no configured job")
    if h.lock_until is not None:
        what = "TTL until" if h.kind == "redis" else "lease until"
        # the time of day in the console's zone (a lease or a TTL ends within hours)
        parts.append(f"{what} {clock(h.lock_until, h.lock_until, zone)}")
    if h.hidden:
        parts.append(h.hidden)
    return "; ".join(parts)


def _holder_row(
    h: Holder, blocks: Mapping[tuple[str, int], list[int]], zone: tzinfo | None
) -> HolderRow:
    flag = _flag(h)
    state = {"waiting": "⧗ WAIT", "stale": "! STALE", "unmapped": "? UNMAPPED", "held": "● held"}
    pid = str(h.pid) if h.pid is not None else ("redis" if h.kind == "redis" else "lease")
    # every cell is data: passwords masked, control characters shown as escapes
    cells = (
        state[flag],
        shown(h.job or UNMAPPED),
        shown(h.key),
        pid,
        "",
        shown(_who(h)),
        shown(_note(h, blocks, zone)),
        shown(h.database),
    )
    since = h.held_since or h.waiting_since or h.state_since
    at_least = h.granted and h.held_since is not None and h.held_from == "at_least"
    return HolderRow(holder_key(h), flag, cells, since, h, at_least)


def _group_of(h: Holder, group_by: GroupBy) -> tuple[str, ...]:
    if group_by == "job":
        return (h.job or "\uffff",)  # unmapped keys last
    if h.pid is not None:
        return (h.database, f"{h.pid:>12}")
    return (h.database, f"{h.kind} {h.locked_by or '?'}")


def _header(group: tuple[str, ...], members: list[HolderRow], group_by: GroupBy) -> HolderRow:
    waiting = sum(r.flag == "waiting" for r in members)
    held = len(members) - waiting
    counts = f"{held} held" + (f", {waiting} waiting" if waiting else "")
    if group_by == "job":
        name = group[0] if group[0] != "\uffff" else "UNMAPPED KEYS (no configured job)"
        title = f"▼ {name} — {counts}"
    else:
        first = members[0].holder
        assert first is not None
        who = first.application_name or first.instance or first.locked_by or "?"
        where = f"pid {first.pid}" if first.pid is not None else first.kind
        title = f"▼ {first.database} {where} {who} — {counts}"
    return HolderRow(("g", group_by, *group), "header", (shown(title),))


def _matches(row: HolderRow, needle: str) -> bool:
    return any(needle in cell.lower() for cell in row.cells)


def _order(sort: SortBy) -> Callable[[HolderRow], tuple[object, ...]]:
    """How the holders of a group are ordered: stale holders first (what an operator looks
    for), then the other granted ones, waiters last, each by database, key and pid; or by one
    column (the age by how long, a pid by its number, the rest by their text). Under a column
    sort the stale holders still come first in their group (`layout` keeps them there)."""
    if sort is None:
        rank = {"stale": 0, "waiting": 2}
        return lambda r: (rank.get(r.flag, 1), r.cells[7], r.cells[2], r.cells[3])
    column = FIELDS.index(sort[0])
    if sort[0] == "FOR":  # ascending: the youngest first (descending: the longest held)
        return lambda r: (r.since is not None, -r.since.timestamp() if r.since else 0.0)
    if sort[0] == "PID":

        def by_pid(r: HolderRow) -> tuple[object, ...]:
            pid = r.cells[column]
            return (not pid.isdigit(), int(pid) if pid.isdigit() else 0, pid)

        return by_pid
    return lambda r: (r.cells[column].lower(),)


def _widths(rows: Iterable[HolderRow]) -> dict[str, int]:
    """Each column as wide as its widest cell (at least its heading, at most MAX_WIDTHS)."""
    from rich.cells import cell_len

    widths = {name: len(name) for name in FIELDS}
    widths["FOR"] = MAX_WIDTHS["FOR"]  # painted later: room for any age
    for row in rows:
        if row.flag == "header":
            continue
        for name, cell in zip(FIELDS, row.cells, strict=False):
            if name != "FOR":
                widths[name] = max(widths[name], cell_len(cell))
    return {name: min(width, MAX_WIDTHS[name]) for name, width in widths.items()}


def layout(
    holders: Iterable[Holder],
    group_by: GroupBy = "job",
    text_filter: str = "",
    sort: SortBy = None,
    zone: tzinfo | None = None,
) -> HolderRows:
    """Rows for the holders view: a header per group, then its holders (granted first)."""
    holders = tuple(holders)
    blocks: dict[tuple[str, int], list[int]] = defaultdict(list)
    for h in holders:
        if not h.granted and h.pid is not None:
            for pid in h.blocked_by:
                blocks[(h.database, pid)].append(h.pid)
    needle = parse_filter(text_filter).holder_text.strip().lower()  # history's words too
    groups: dict[tuple[str, ...], list[HolderRow]] = defaultdict(list)
    for h in holders:
        row = _holder_row(h, blocks, zone)
        if needle and not _matches(row, needle):
            continue
        groups[_group_of(h, group_by)].append(row)
    rows: list[HolderRow] = []
    index: dict[tuple[object, ...], int] = {}
    for group in sorted(groups):
        members = groups[group]
        members.sort(key=_order(sort), reverse=bool(sort and sort[1]))
        if sort is not None:  # whatever the column and direction: stale holders stay on top
            members.sort(key=lambda r: r.flag != "stale")
        for row in (_header(group, members, group_by), *members):
            key = row.key
            while key in index:  # the same holder listed twice: keep both rows addressable
                key = (*key, "dup")
            index[key] = len(rows)
            rows.append(
                row
                if key == row.key
                else HolderRow(key, row.flag, row.cells, row.since, row.holder, row.at_least)
            )
    return HolderRows(
        rows=tuple(rows),
        index=index,
        group_by=group_by,
        text_filter=text_filter,
        widths=_widths(rows),
        sort=sort,
        total=len(holders),
        shown=sum(len(m) for m in groups.values()),
        waiting=sum(not h.granted for h in holders),
        stale=sum(bool(h.stale) for h in holders),
        unmapped=sum(h.job is None for h in holders),
    )
