"""Keep the last good data of a database that failed this refresh (pure: no Textual, no I/O).

When a snapshot carries errors for some databases, their holders, job states, runs, slot
reports and alerts are taken from the previous snapshot, so an operator still sees them
(dimmed, marked old: `freshness.py`) while the console keeps refreshing and the Console
reconnects by itself.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from lockconsole.model.views import Snapshot
from lockconsole.tui.freshness import carry_alerts

if TYPE_CHECKING:
    from lockconsole.config.loader import Config


def failed_databases(snapshot: Snapshot) -> set[str]:
    return {name for name, _ in snapshot.errors}


def carry_over(previous: Snapshot | None, new: Snapshot, config: Config) -> Snapshot:
    """The new snapshot with what the old one knew of databases it could not read, and the
    panes' per-snapshot indexes built here, in the refresh worker, not on the UI thread."""
    from lockconsole.tui.pane_rows import prepared

    return prepared(_carry_over(previous, new, config))


def _carry_over(previous: Snapshot | None, new: Snapshot, config: Config) -> Snapshot:
    """`new`, with the previous data of every database that failed in `new` put back."""
    failed = failed_databases(new)
    if previous is None or not failed:
        return new
    jobs = config.jobs

    def ledger_of(job: str) -> str | None:
        if job not in jobs:
            return None
        return config.ledger_for(jobs[job]).name

    holders = [h for h in new.holders if h.database not in failed]
    holders += [h for h in previous.holders if h.database in failed]
    old_status = {s.job.name: s for s in previous.jobs}
    statuses = tuple(
        old_status.get(s.job.name, s) if s.job.database in failed else s for s in new.jobs
    )
    lost_ledgers = {name for name in failed if name}
    kept_runs = [r for r in previous.runs if ledger_of(r.job) in lost_ledgers]
    runs = sorted(
        [*(r for r in new.runs if ledger_of(r.job) not in lost_ledgers), *kept_runs],
        key=lambda r: (r.started_at, r.id or 0),
        reverse=True,
    )
    slots = [s for s in new.slots if ledger_of(s.job) not in lost_ledgers]
    slots += [s for s in previous.slots if ledger_of(s.job) in lost_ledgers]
    slots.sort(key=lambda s: s.slot, reverse=True)
    database_of = {name: job.database for name, job in jobs.items()}
    alerts = carry_alerts(previous.alerts, new.alerts, failed, ledger_names(config), database_of)
    return replace(
        new,
        holders=tuple(holders),
        jobs=statuses,
        runs=tuple(runs),
        slots=tuple(slots),
        alerts=alerts,
    )


def news(snapshot: Snapshot, seen: set[tuple[object, ...]]) -> list[str]:
    """Log lines for the alerts and notes of `snapshot` not in `seen` (which gains them)."""
    lines: list[str] = []
    for alert in snapshot.alerts:
        if alert.key not in seen:  # a message may change (an idle time counting up): one line
            seen.add(alert.key)
            lines.append(f"alert: {alert.message}")
    for database, note in snapshot.notes:
        if ("note", database, note) not in seen:
            seen.add(("note", database, note))
            lines.append(f"note: {database}: {note}")
    return lines


def job_names(config: Config) -> set[str]:
    """The configured jobs' names."""
    return set(config.jobs)


def ledger_names(config: Config) -> dict[str, str]:
    """Each configured job's ledger database."""
    return {name: config.ledger_for(job).name for name, job in config.jobs.items()}
