"""Every fact about one lock holder, as the describe screen and the release dialog show it.

holder_details(holder, blocks=(), zone=None)
                                    a two-column grid: the stale reason first, then every
                                    field (key, job, database, pid, user, application,
                                    client, backend and transaction start, state, query,
                                    who it blocks or waits for), times in the
                                    console's zone
release_target(holder)              one line saying exactly what a force-release ends
holder_label(holder)                what typing confirms: the job name, or the key
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, tzinfo

from rich.table import Table
from rich.text import Text

from lockconsole.model.views import Holder
from lockconsole.text import times
from lockconsole.text.safe import data_text
from lockconsole.tui.past import JOURNAL

DETAIL_WIDTH = 2000  # terminal cells of one detail (a 10 KB query ends in '…')


def holder_label(holder: Holder) -> str:
    """What typing confirms: the job name, or the key of an unmapped holder."""
    return holder.job or holder.key


def release_target(holder: Holder) -> str:
    """One line saying exactly what a force-release ends."""
    if holder.kind == "lease":
        return f"Expire lease {holder.key!r} held by {holder.locked_by or '?'}"
    if holder.kind == "redis":
        return f"Delete Redis key {holder.key!r} if it still holds {holder.value!r}"
    if holder.kind == "user_lock":
        return f"Kill MySQL connection {holder.pid} on {holder.database}"
    return f"Terminate PostgreSQL backend pid {holder.pid} on {holder.database}"


HELD_FROM = {
    "database": "as the database says",
    "run": "the start of the run that took it (the ledger)",
    "transaction": "the start of its transaction, which the lock lives as long as",
}


def held_since_text(holder: Holder, zone: tzinfo | None = None) -> str | None:
    """Since when the lock is held, and how that is known (or only bounded)."""
    since = holder.held_since
    if since is None:
        return None
    at = times.stamp(since, tz=zone)
    if holder.held_from != "at_least":
        how = HELD_FROM.get(holder.held_from or "")
        return f"{at} ({how})" if how else at
    if holder.first_seen is not None and since >= holder.first_seen:
        how = "when this console first saw it; the database does not say when it was taken"
    else:
        how = "its idle session's last statement ended then, so it was taken before"
    text = f"at least since {at} ({how})"
    if holder.backend_start is not None:
        text += (
            f"; at most since {times.stamp(holder.backend_start, tz=zone)} (its session's start)"
        )
    return text


def blocked_pids(holder: Holder, holders: Iterable[Holder]) -> tuple[int, ...]:
    """The sessions waiting for a lock this holder has (same database)."""
    if holder.pid is None or not holder.granted:
        return ()
    return tuple(
        sorted(
            h.pid
            for h in holders
            if not h.granted
            and h.pid is not None
            and h.database == holder.database
            and holder.pid in h.blocked_by
        )
    )


def holder_details(holder: Holder, blocks: Sequence[int] = (), zone: tzinfo | None = None) -> Table:
    """Every fact about the holder an operator needs, as a two-column grid (stale reason first,
    so a short dialog shows it without scrolling); its times in `zone` (UTC by default)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")

    def add(label: str, value: object) -> None:
        if value not in (None, ""):
            text = times.stamp(value, tz=zone) if isinstance(value, datetime) else str(value)
            grid.add_row(label, data_text(text, limit=DETAIL_WIDTH))

    if holder.stale:
        grid.add_row(
            Text("! STALE", style="bold yellow"),
            data_text(holder.stale, style="yellow", limit=DETAIL_WIDTH),
        )
    add("job", holder.job or "? UNMAPPED key (no configured job)")
    add("database", holder.database + (f" ({holder.datname})" if holder.datname else ""))
    if holder.kind == "lease":
        add("lease", f"{holder.key} in table {holder.source}")
        add("locked by", holder.locked_by)
        add("fencing token", holder.fencing_token)
        add("lock until", holder.lock_until)
    elif holder.kind == "redis":  # the exact value: the release compares it
        add("redis key", holder.key)
        add("value", holder.value)
        add("host", holder.locked_by)
        add("fencing token", holder.fencing_token)
        add("TTL until", holder.lock_until or "never (no TTL)")
    else:
        add("key", f"{holder.key} ({holder.kind}, {holder.key_kind})")
        add("pid", holder.pid)
        add("lock mode", holder.mode)
    add("read from", holder.source)
    add("instance", holder.instance)
    add("run", f"#{holder.run_id}" if holder.run_id is not None else None)
    add("user", holder.user)
    add("application", holder.application_name)
    add("client", holder.client_addr)
    add("backend start", holder.backend_start)
    add("transaction start", holder.xact_start)
    state = holder.state
    if state and holder.state_since:
        state = f"{state} since {times.stamp(holder.state_since, tz=zone)}"
    add("state", state)
    add("query", holder.query)
    if holder.granted:
        add("held since", held_since_text(holder, zone))
        add("first seen", holder.first_seen)
        if blocks:
            add("blocks", "pid " + ", ".join(str(p) for p in blocks))
    else:
        add("waiting since", holder.waiting_since)
        waits = ", ".join(str(p) for p in holder.blocked_by)
        add("waits for", f"pid {waits}" if waits else "? (the holder is not visible)")
    if holder.hidden:
        # a holder of the past (time travel) carries what the journal saw of it there
        label = "journal" if holder.source == JOURNAL else "hidden"
        grid.add_row(
            Text(label, style="bold"),
            data_text(holder.hidden, style="italic", limit=DETAIL_WIDTH),
        )
    return grid
