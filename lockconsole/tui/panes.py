"""What the jobs and history panes, the status line and the banner show (rows and texts).

Pure functions from the immutable Snapshot to (row key, cells) and rich Text; the app puts
them on screen with `tables.sync_table`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import datetime

from rich.text import Text

from lockconsole.model.jobs import Run
from lockconsole.model.views import JobStatus, SlotReport, Snapshot
from lockconsole.text.safe import fit, shown
from lockconsole.text.times import age, duration, seconds, when

JOB_COLUMNS = ("JOB", "HOLDER", "LAST", "NEXT", "SCHEDULE", "STRATEGY · KEY", "DATABASE")
HISTORY_COLUMNS = ("SLOT", "JOB", "SLOT STATUS", "INSTANCE", "OUTCOME", "TOOK", "MESSAGE")
HISTORY_LIMIT = 300
BANNER_WIDTH = 400  # terminal cells of one database error in the banner
BAD = {"double_run", "missed", "lock_lost", "failed"}
STATUS_TEXT = {
    "double_run": "DOUBLE RUN",
    "missed": "MISSED",
    "lock_lost": "LOCK LOST",
    "failed": "FAILED",
    "running": "running",
    "ok": "ok",
}
OUTCOME_STYLE = {
    "failed": "bold red",
    "lock_lost": "bold red",
    "acquired": "cyan",
    "skipped": "dim",
    "succeeded": "green",
}


def job_rows(snapshot: Snapshot, now: datetime) -> list[tuple[str, list[str | Text]]]:
    newest: dict[str, SlotReport] = {}
    for report in snapshot.slots:
        if report.job not in newest or report.slot > newest[report.job].slot:
            newest[report.job] = report
    return [(s.job.name, _job_cells(s, newest.get(s.job.name), now)) for s in snapshot.jobs]


def _last(s: JobStatus, report: SlotReport | None, now: datetime) -> str | Text:
    """The job's pause (who, how long, why); else the newest slot's outcome and when."""
    if s.pause is not None:
        p = s.pause
        return Text(
            shown(f"PAUSED by {p.paused_by} {age(p.paused_at, now)} ago: {p.note}"),
            style="bold yellow",
        )
    if report is not None:
        got = [i for i, outcome in report.outcomes if outcome != "skipped"]
        who = f" {','.join(got)}" if got and report.status != "double_run" else ""
        style = (
            "bold red"
            if report.status in BAD
            else ("cyan" if report.status == "running" else "green")
        )
        return Text(
            f"{STATUS_TEXT.get(report.status, report.status)}{who} {age(report.slot, now)} ago",
            style=style,
        )
    if s.last_run is None:
        return Text("never", style="dim")
    r = s.last_run
    return Text(f"{r.outcome} {age(r.started_at, now)} ago", style=OUTCOME_STYLE.get(r.outcome, ""))


def _job_cells(s: JobStatus, report: SlotReport | None, now: datetime) -> list[str | Text]:
    job, h = s.job, s.holder
    if h is None:
        holder: str | Text = Text("free", style="dim")
    else:
        who = h.instance or h.application_name or h.locked_by or h.user or "?"
        pid = f"/{h.pid}" if h.pid is not None else " (lease)"
        holder = Text(f"{who}{pid}", style="bold red" if h.stale else "bold")
    last = _last(s, report, now)
    nxt = f"{when(s.next_fire, now)} (in {age(now, s.next_fire)})" if s.next_fire else "-"
    return [
        job.name,
        holder,
        last,
        nxt,
        job.schedule or "-",
        f"{job.strategy} {job.key}",
        job.database,
    ]


Row = tuple[str, list[str | Text]]


def history_rows(
    snapshot: Snapshot, now: datetime, text_filter: str = ""
) -> tuple[list[Row], dict[str, tuple[Run, list[Run]]]]:
    """Rows per attempt, newest slot first (a missed slot is one row), and the run of each key
    with the runs of its slot (for the run detail screen)."""
    by_slot: dict[tuple[str, datetime], list[Run]] = defaultdict(list)
    for run in snapshot.runs:
        by_slot[(run.job, run.slot)].append(run)
    needle = text_filter.strip().lower()
    rows: list[Row] = []
    runs_of: dict[str, tuple[Run, list[Run]]] = {}
    for report in sorted(snapshot.slots, key=lambda s: s.slot, reverse=True):
        status = Text(
            STATUS_TEXT.get(report.status, report.status),
            style="bold red" if report.status in BAD else "",
        )
        slot_runs = sorted(
            by_slot.get((report.job, report.slot), []), key=lambda r: (r.started_at, r.id or 0)
        )
        if not slot_runs:
            cells: list[str | Text] = [
                when(report.slot, now),
                report.job,
                status,
                "-",
                "-",
                "-",
                "no instance took the lock",
            ]
            rows.append((f"missed:{report.job}:{report.slot.isoformat()}", cells))
        for run in slot_runs:
            key = (
                f"run:{run.id}"
                if run.id is not None
                else (f"run:{run.job}:{run.instance}:{run.started_at.isoformat()}")
            )
            outcome = Text(run.outcome, style=OUTCOME_STYLE.get(run.outcome, ""))
            took = duration(run.started_at, run.finished_at)
            cells = [
                when(report.slot, now),
                report.job,
                status,
                run.instance,
                outcome,
                took,
                run.message or "",
            ]
            rows.append((key, cells))
            runs_of[key] = (run, slot_runs)
        if len(rows) >= HISTORY_LIMIT:
            break
    if needle:
        rows = [(k, c) for k, c in rows if any(needle in str(cell).lower() for cell in c)]
    return rows, runs_of


def status_text(
    databases: Iterable[str],
    errors: Mapping[str, str],
    *,
    loaded: bool,
    data_age: str,
    refresh: float,
    paused: bool,
    read_only: bool,
    busy: float | None,
    alerts: int,
) -> Text:
    """The one status line: each database's state, data age, refresh, badges."""
    text = Text()
    for name in map(shown, databases):
        if not loaded:
            text.append(f"{name} … ", style="dim")
        elif name in errors:
            text.append(f"{name} ✖ down ", style="bold red")
        else:
            text.append(f"{name} ● ok ", style="green")
    text.append("│ ")
    text.append(f"data {data_age} old" if loaded else "loading…")
    text.append(" │ ")
    text.append(
        "PAUSED" if paused else f"every {seconds(refresh)}", style="bold yellow" if paused else ""
    )
    if busy is not None and busy >= 1:
        text.append(f" │ refreshing {busy:.0f}s…", style="yellow")
    if alerts:
        text.append(f" │ {alerts} alerts (o)", style="bold red")
    if read_only:
        text.append(" ")
        text.append(" READ-ONLY ", style="bold reverse")
    return text


def banner_text(errors: Mapping[str, str], last_good: datetime | None, now: datetime) -> Text:
    """What went wrong, and how old the data still shown is."""
    text = Text()
    for name, error in errors.items():
        text.append(f"⚠ {shown(name)}: ", style="bold")
        text.append(fit(shown(error), BANNER_WIDTH) + "\n")
    if last_good is None:
        text.append("no data yet; retrying on every refresh")
    else:
        text.append(
            f"showing the last good data, from {last_good:%H:%M:%S} UTC "
            f"({age(last_good, now)} old); retrying on every refresh"
        )
    return text


def alert_lines(snapshot: Snapshot) -> list[str]:
    return [a.message for a in snapshot.alerts]
