"""What the jobs and history panes show (rows and texts); the status line and the banner are
`widgets/status_line.py`.

Pure functions from the immutable Snapshot to (row key, cells) and rich Text; the refresh
worker makes them a pane's model (`pane_models.build_panes`) and the panes paint the rows on
screen (`widgets/pane_table.py`). `job_cells` is one job's row now: what the jobs pane asks
for its visible rows each second.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, tzinfo
from typing import Any

from rich.text import Text

from lockconsole.model.jobs import Run
from lockconsole.model.slots import next_fire
from lockconsole.model.verdict import slot_status
from lockconsole.model.views import JobStatus, SlotReport, Snapshot
from lockconsole.text.safe import shown
from lockconsole.text.times import age, clock, duration
from lockconsole.tui.nocolor import ALARM
from lockconsole.tui.older_runs import parse_filter

JOB_COLUMNS = ("JOB", "HOLDER", "LAST", "NEXT", "SCHEDULE", "STRATEGY · KEY", "DATABASE")
HISTORY_COLUMNS = (
    "SLOT",
    "JOB",
    "SLOT STATUS",
    "TRIGGER",
    "INSTANCE",
    "OUTCOME",
    "TOOK",
    "MESSAGE",
)
MISSED_ROWS = 300  # missed-slot rows at most (an every-second job can miss many); runs: all
BANNER_WIDTH = 400  # terminal cells of one database error in the banner
BAD = {"double_run", "missed", "lock_lost", "failed"}
NOT_CONFIGURED = "not in this config"
# every bad state carries a glyph, so it is told without colour (NO_COLOR) too
STATUS_TEXT = {
    "double_run": "✖ DOUBLE RUN",
    "missed": "✖ MISSED",
    "lock_lost": "✖ LOCK LOST",
    "failed": "✖ FAILED",
    "running": "running",
    "ok": "ok",
    "retried": "retried",
    "skipped": "skipped",
}
OUTCOME_STYLE = {
    "failed": ALARM,
    "lock_lost": ALARM,
    "acquired": "cyan",
    "skipped": "dim",
    "succeeded": "green",
}


@dataclass(frozen=True)
class Staleness:
    """Which data on screen is old: databases that failed and when their data was good."""

    down: Mapping[str, datetime | None] = field(default_factory=dict)  # database -> last good
    ledger_of: Mapping[str, str] = field(default_factory=dict)  # job -> its ledger database

    def of_database(self, name: str) -> tuple[bool, datetime | None]:
        if "refresh" in self.down:
            return True, self.down["refresh"]
        return name in self.down, self.down.get(name)

    def of_ledger(self, job: str) -> tuple[bool, datetime | None]:
        ledger = self.ledger_of.get(job)
        return (False, None) if ledger is None else self.of_database(ledger)


def _unknown(good: datetime | None, now: datetime) -> Text:
    return Text("unknown" + (f" ({age(good, now)} old)" if good else ""), style="dim")


def _ended(runs: Iterable[Run]) -> datetime | None:
    """When the newest of these attempts happened: its finish, else its start."""
    return max((r.finished_at or r.started_at for r in runs), default=None)


def job_rows(
    snapshot: Snapshot,
    now: datetime,
    *,
    zone: tzinfo | None = None,
    stale: Staleness | None = None,
    text_filter: str = "",
) -> list[tuple[str, list[str | Text]]]:
    """A row per job (the filter's job: word, or its free text anywhere in the row, keeps)."""
    newest, runs_of = _per_snapshot(snapshot)
    wanted = parse_filter(text_filter)
    needle = wanted.text.strip().lower()
    rows = [
        (
            s.job.name,
            _job_cells(s, newest.get(s.job.name), runs_of, now, zone, stale or Staleness()),
        )
        for s in snapshot.jobs
        if wanted.job in (None, s.job.name)
    ]
    if needle:
        rows = [(k, c) for k, c in rows if any(needle in str(cell).lower() for cell in c)]
    return rows


UNRUN = ("missed", "paused")  # slots that get a row of their own without a run
# the indexes of the last two snapshots (the one on screen and the one the refresh worker
# lays out), so neither thread throws the other's away: newest reports and runs by slot,
# reports by slot, and job statuses by name
_memo: list[tuple[Snapshot, Any]] = []
_judged_memo: list[tuple[Snapshot, Any]] = []
_status_memo: list[tuple[Snapshot, Any]] = []
MEMO = 2


def _recall(memo: list[tuple[Snapshot, Any]], snapshot: Snapshot) -> Any:
    for seen, value in list(memo):
        if seen is snapshot:
            return value
    return None


def _keep(memo: list[tuple[Snapshot, Any]], snapshot: Snapshot, value: Any) -> None:
    memo[:] = [*memo[-(MEMO - 1) :], (snapshot, value)]


def prepared(snapshot: Snapshot) -> Snapshot:
    """`snapshot`, with the indexes the panes build of it made now (in the refresh worker)."""
    _judged(snapshot)
    _per_snapshot(snapshot)
    _statuses(snapshot)
    return snapshot


def _statuses(snapshot: Snapshot) -> dict[str, JobStatus]:
    found = _recall(_status_memo, snapshot)
    if found is None:
        found = {s.job.name: s for s in snapshot.jobs}
        _keep(_status_memo, snapshot, found)
    return found


def job_cells(
    snapshot: Snapshot,
    name: str,
    now: datetime,
    *,
    zone: tzinfo | None = None,
    stale: Staleness | None = None,
) -> list[str | Text] | None:
    """Job `name`'s row at `now` (None when the snapshot has no such job)."""
    status = _statuses(snapshot).get(name)
    if status is None:
        return None
    newest, runs_of = _per_snapshot(snapshot)
    return _job_cells(status, newest.get(name), runs_of, now, zone, stale or Staleness())


def _judged(
    snapshot: Snapshot,
) -> tuple[dict[tuple[str, datetime], SlotReport], dict[tuple[str, datetime], SlotReport]]:
    """The snapshot's reports by (job, slot), and those of slots no instance ran: once per
    snapshot, not per repaint."""
    found = _recall(_judged_memo, snapshot)
    if found is not None:
        return found
    every = {(r.job, r.slot): r for r in snapshot.slots}
    unrun = {k: r for k, r in every.items() if r.acquired == 0 and r.status in UNRUN}
    _keep(_judged_memo, snapshot, (every, unrun))
    return every, unrun


def _per_snapshot(
    snapshot: Snapshot,
) -> tuple[dict[str, SlotReport], dict[tuple[str, datetime], list[Run]]]:
    """Each job's newest slot report and the runs by slot: once per snapshot, not per second
    (a long lookback is tens of thousands of reports)."""
    found = _recall(_memo, snapshot)
    if found is not None:
        return found
    newest: dict[str, SlotReport] = {}
    for report in snapshot.slots:
        if report.job not in newest or report.slot > newest[report.job].slot:
            newest[report.job] = report
    runs_of: dict[tuple[str, datetime], list[Run]] = defaultdict(list)
    for run in snapshot.runs:
        runs_of[(run.job, run.slot)].append(run)
    _keep(_memo, snapshot, (newest, runs_of))
    return newest, runs_of


def _last(
    s: JobStatus,
    report: SlotReport | None,
    runs_of: Mapping[tuple[str, datetime], list[Run]],
    now: datetime,
) -> str | Text:
    """The newest slot's outcome (who got the lock, how it ended), or the newest attempt when it
    is newer (a manual run, a skip); the age counts from the attempt's finish (else start)."""
    if s.pause is not None:
        p = s.pause
        return Text(
            shown(f"PAUSED by {p.paused_by} {age(p.paused_at, now)} ago: {p.note}"),
            style="bold yellow",
        )
    r = s.last_run
    if report is not None:
        runs = runs_of.get((report.job, report.slot), [])
        at = _ended(runs) or report.slot
        other = r is not None and (r.job, r.slot) != (report.job, report.slot)
        if r is None or not other or (r.finished_at or r.started_at) <= at:
            got = [i for i, outcome in report.outcomes if outcome != "skipped"]
            who = f" {','.join(got)}" if got and report.status != "double_run" else ""
            style = (
                ALARM
                if report.status in BAD
                else ("cyan" if report.status == "running" else "green")
            )
            status = STATUS_TEXT.get(report.status, report.status)
            return Text(f"{status}{who} {age(at, now)} ago", style=style)
    if r is None:
        return Text("never", style="dim")
    manual = " manual" if r.trigger == "manual" else ""
    return Text(
        f"{r.outcome}{manual} {age(_ended([r]), now)} ago",
        style=OUTCOME_STYLE.get(r.outcome, ""),
    )


def _job_cells(
    s: JobStatus,
    report: SlotReport | None,
    runs_of: Mapping[tuple[str, datetime], list[Run]],
    now: datetime,
    zone: tzinfo | None,
    stale: Staleness,
) -> list[str | Text]:
    job, h = s.job, s.holder
    down, good = stale.of_database(job.database)
    if down:
        holder: str | Text = _unknown(good, now)
    elif h is None:
        holder = Text("free", style="dim")
    else:
        who = h.instance or h.application_name or h.locked_by or h.user or "?"
        pid = f"/{h.pid}" if h.pid is not None else f" ({h.kind})"
        mark = "! " if h.stale else ""
        holder = Text(f"{mark}{who}{pid}", style=ALARM if h.stale else "bold")
    ledger_down, ledger_good = stale.of_ledger(job.name)
    last = _unknown(ledger_good, now) if ledger_down else _last(s, report, runs_of, now)
    fire = s.next_fire
    if fire is not None and fire <= now:  # its snapshot is late: the schedule goes on
        fire = next_fire(job, now)
    nxt = f"{clock(fire, now, zone)} (in {age(now, fire)})" if fire else "-"
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


def run_key(run: Run) -> str:
    """A history row's key: unique across ledgers (their ids are not), the same for one row."""
    return f"run:{run.id}:{run.job}:{run.instance}:{run.started_at.isoformat()}"


def _trigger(run: Run) -> str:
    if run.trigger != "manual":
        return run.trigger
    return f"manual by {run.actor}" if run.actor else "manual"


def history_rows(
    snapshot: Snapshot,
    now: datetime,
    text_filter: str = "",
    *,
    zone: tzinfo | None = None,
    configured: Collection[str] | None = None,
    older: Iterable[Run] = (),
) -> tuple[list[Row], dict[str, tuple[Run, list[Run]]]]:
    """Every attempt of the snapshot (the ledger's, within its lookback and history_limit),
    grouped under its slot with the slot's status, newest slot first, and a row per missed slot
    no instance attempted; and the run of each key with the runs of its slot (run detail).

    Runs of jobs not in `configured` are marked "not in this config" (their alerts are not
    this configuration's). `older`: runs read past the snapshot's page ("m"). The filter's
    `job:`, `instance:` and `outcome:` words keep those exactly; the rest matches anywhere."""
    wanted = parse_filter(text_filter)
    by_slot: dict[tuple[str, datetime], list[Run]] = defaultdict(list)
    keys: dict[int, str] = {}
    seen: set[str] = set()
    for run in (*snapshot.runs, *older):
        key = run_key(run)
        if key in seen or not wanted.keeps(run):  # two names for one ledger: the row twice
            continue
        seen.add(key)
        keys[id(run)] = key
        by_slot[(run.job, run.slot)].append(run)
    every, unrun = _judged(snapshot)  # the whole lookback, judged
    reports = {k: every[k] for k in by_slot if k in every}
    # a slot without a run shown gets a row when no instance ran it (its runs may be older)
    reports |= {k: r for k, r in unrun.items() if k not in reports and wanted.keeps_missed(r.job)}
    slots = sorted(set(by_slot) | set(reports), key=lambda js: (js[1], js[0]), reverse=True)
    needle = wanted.text.strip().lower()
    rows: list[Row] = []
    runs_of: dict[str, tuple[Run, list[Run]]] = {}
    missed = 0
    for job, slot in slots:
        slot_runs = sorted(by_slot.get((job, slot), []), key=lambda r: (r.started_at, r.id or 0))
        report = reports.get((job, slot))
        # a slot no report judges (not due yet, a manual run): told by the same rule, unjudged
        code = report.status if report is not None else slot_status(slot_runs, now, due=False)
        known = configured is None or job in configured
        status = Text(
            STATUS_TEXT.get(code, code),
            style=(ALARM if code in BAD else "") if known else "dim",
        )
        name: str | Text = job if known else Text(f"{job} · {NOT_CONFIGURED}", style="dim")
        label = clock(slot, now, zone)
        if not slot_runs:
            missed += 1
            if missed > MISSED_ROWS:
                continue
            cells: list[str | Text] = [label, name, status, "-", "-", "-", "-"]
            cells.append("no instance took the lock")
            rows.append((f"missed:{job}:{slot.isoformat()}", cells))
        for run in slot_runs:
            key = keys[id(run)]
            mark = "✖ " if run.outcome in ("failed", "lock_lost") else ""
            outcome = Text(mark + run.outcome, style=OUTCOME_STYLE.get(run.outcome, ""))
            cells = [
                label,
                name,
                status,
                _trigger(run),
                run.instance,
                outcome,
                duration(run.started_at, run.finished_at),
                run.message or "",
            ]
            rows.append((key, cells))
            runs_of[key] = (run, slot_runs)
    if needle:
        rows = [(k, c) for k, c in rows if any(needle in str(cell).lower() for cell in c)]
    return rows, runs_of


def alert_lines(snapshot: Snapshot) -> list[str]:
    return [a.message for a in snapshot.alerts]
