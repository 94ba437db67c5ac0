"""Describe one lock holder or one job: every field on a screen of its own.

    HolderScreen(holder, blocks=(), zone=None, read_only=False)   -> bool: True when release
                                                                     was chosen
    JobScreen(status, runs, now=..., zone=None, read_only=False)  -> str | None: "trigger"
                                                                     when chosen

Their times are in the console's zone (`[console] timezone`, UTC by default), each stamp naming
it, as the status line of the dashboard underneath does.

Both work in --read-only mode (they only show). From a holder, `x` asks to force-release it
(the dashboard runs it); from a job, `t` asks to trigger it. Refused there with a notice in
--read-only mode. Escape closes; `q` quits the console, as on every screen.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Static

from lockconsole.model.jobs import Run
from lockconsole.model.slots import next_fire
from lockconsole.model.views import Holder, JobStatus
from lockconsole.text import times
from lockconsole.text.safe import data_text, shown
from lockconsole.tui.widgets.holders.facts import holder_details, release_target

FIRINGS = 5  # next firings shown
LAST_RUNS = 10  # last runs shown
DESCRIBE_CSS = """
    & #describe-title { text-style: bold; background: $panel; padding: 0 1; }
    & #describe-body { padding: 0 1; height: 1fr; }
    & #describe-hint { text-style: bold; background: $panel; padding: 0 1; }
    & .heading { text-style: bold; margin-top: 1; }
"""


class DescribeScreen(Screen[object]):
    """The common frame: a title line, a scrolling body, a key line under it where the screen has
    one, the footer; Escape closes."""

    def __init__(self, *, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only

    def refuse_if_read_only(self, what: str) -> bool:
        if self.read_only:
            self.notify(f"{what} refused: the console is in --read-only mode", severity="warning")
        return self.read_only

    def on_mount(self) -> None:
        self.query_one("#describe-body", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)


class HolderScreen(DescribeScreen):
    """Every field of one lock holder (or waiter), and its release one key away."""

    DEFAULT_CSS = "HolderScreen {" + DESCRIBE_CSS + "}"
    BINDINGS = [
        Binding("escape", "close", "Close", id="describe_close"),
        Binding("x", "release", "Release", id="describe_release"),
    ]

    def __init__(
        self,
        holder: Holder,
        blocks: Sequence[int] = (),
        *,
        zone: tzinfo | None = None,
        read_only: bool = False,
    ):
        super().__init__(read_only=read_only)
        self.holder = holder
        self.blocks = tuple(blocks)
        self.zone = zone

    def compose(self) -> ComposeResult:
        h = self.holder
        what = "holder" if h.granted else "waiter"
        title = f"Lock {what} · {h.job or h.key} · {h.database}"
        yield Static(shown(title), id="describe-title", markup=False)
        with VerticalScroll(id="describe-body"):
            yield Static(holder_details(h, self.blocks, self.zone), id="describe-fields")
        if h.granted:  # under the body, not in it: in view however long the body is
            line = f"x: {release_target(h)} (asks first)"
            if self.read_only:
                line = "read-only: release is refused"
            yield Static(shown(line), id="describe-hint", markup=False)
        yield Footer()

    def action_release(self) -> None:
        if self.refuse_if_read_only("force-release"):
            return
        if not self.holder.granted:
            blockers = ", ".join(map(str, self.holder.blocked_by)) or "the holder"
            self.notify(
                f"Nothing to release: this session only waits; release {blockers} instead",
                severity="warning",
            )
            return
        self.dismiss(True)


def job_fields(status: JobStatus) -> Table:
    """The job's configuration as a two-column grid."""
    job = status.job
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    rows: list[tuple[str, object]] = [
        ("database", job.database),
        ("strategy", job.strategy),
        ("key", f"{job.key} ({job.key.kind})"),
        (
            "lock group",
            f"{job.lock_group} (its lock is shared on purpose)" if job.lock_group else None,
        ),
        ("schedule", f"{job.schedule} ({job.timezone})" if job.schedule else "none (manual)"),
        ("command", " ".join(job.command) if job.command else None),
        ("callable", job.callable),
        ("max duration", times.took(job.max_duration) if job.max_duration else "none"),
        ("min hold", times.took(job.min_hold) if job.min_hold else None),
        ("stop grace", f"{job.stop_grace:g}s"),
        ("watchdog", f"every {job.watchdog_interval:g}s"),
        ("lease table", job.lease_table if job.strategy == "lease" else None),
        ("redis prefix", job.redis_prefix if job.strategy == "redis" else None),
        (
            "ledger commit",
            "async (skips and outcomes do not wait for the WAL flush)"
            if job.ledger_commit == "async"
            else None,
        ),
    ]
    if job.idempotency is not None:
        spec = job.idempotency
        rows.append(("idempotency", f"{spec.table}({', '.join(spec.key)})"))
    h = status.holder
    holder = "free"
    if h is not None:
        who = h.instance or h.application_name or h.locked_by or h.user or "?"
        holder = f"{who} (pid {h.pid})" if h.pid is not None else f"{who} ({h.kind})"
        holder += f" — ! STALE: {h.stale}" if h.stale else ""
    rows.append(("holder", holder))
    for label, value in rows:
        if value not in (None, ""):
            grid.add_row(label, data_text(value, limit=400))
    return grid


def next_firings(status: JobStatus, now: datetime, count: int = FIRINGS) -> list[datetime]:
    out: list[datetime] = []
    at = now
    while len(out) < count and (fire := next_fire(status.job, at)) is not None:
        out.append(fire)
        at = fire
    return out


def last_runs(runs: Sequence[Run], now: datetime, zone: tzinfo | None = None) -> Table:
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    for name in ("slot", "instance", "outcome", "took", "message"):
        table.add_column(name, no_wrap=name != "message", overflow="fold")
    for run in sorted(runs, key=lambda r: (r.started_at, r.id or 0), reverse=True)[:LAST_RUNS]:
        mark = "✖ " if run.outcome in ("failed", "lock_lost") else ""
        table.add_row(
            times.stamp(run.slot, tz=zone),
            data_text(run.instance, limit=30),
            Text(mark + run.outcome),
            times.duration(run.started_at, run.finished_at),
            data_text(run.message or "", limit=200),
        )
    return table


class JobScreen(DescribeScreen):
    """One job: its configuration, its next firings and its last runs; `t` triggers it."""

    DEFAULT_CSS = "JobScreen {" + DESCRIBE_CSS + "}"
    BINDINGS = [
        Binding("escape", "close", "Close", id="describe_close"),
        Binding("t", "trigger", "Trigger", id="describe_trigger"),
    ]

    def __init__(
        self,
        status: JobStatus,
        runs: Sequence[Run],
        *,
        now: datetime,
        zone: tzinfo | None = None,
        read_only: bool = False,
    ) -> None:
        super().__init__(read_only=read_only)
        self.zone = zone
        self.status = status
        self.runs = [r for r in runs if r.job == status.job.name]
        self.now = now

    def compose(self) -> ComposeResult:
        job = self.status.job
        yield Static(shown(f"Job · {job.name}"), id="describe-title", markup=False)
        with VerticalScroll(id="describe-body"):
            yield Static(job_fields(self.status), id="describe-fields")
            fires = next_firings(self.status, self.now)
            yield Static("Next firings", classes="heading")
            text = (
                "\n".join(
                    f"{times.stamp(f, tz=self.zone)}  (in {times.age(self.now, f)})" for f in fires
                )
                or "none: the job has no schedule"
            )
            yield Static(text, id="describe-firings", markup=False)
            ran = len(self.runs)
            yield Static(f"Last runs ({min(ran, LAST_RUNS)} of {ran})", classes="heading")
            if self.runs:
                yield Static(last_runs(self.runs, self.now, self.zone), id="describe-runs")
            else:
                yield Static("none in the ledger's lookback window", markup=False)
        yield Footer()

    def action_trigger(self) -> None:
        if not self.refuse_if_read_only("trigger"):
            self.dismiss("trigger")
