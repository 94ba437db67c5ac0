"""One run of the ledger in full, with the other attempts of the same slot.

RunDetailScreen(run, slot_runs, zone, output)   a modal; Escape closes (q quits, as everywhere);
                                        `output` reads the run's kept output tail, shown below
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import tzinfo
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from lockconsole.config.urls import redact
from lockconsole.model.jobs import Run
from lockconsole.text import times
from lockconsole.text.safe import clean, data_text, printable_lines, shown
from lockconsole.tui.widgets.run_output import RunOutputView

if TYPE_CHECKING:
    from lockconsole.backends.ledger.outputs import RunOutput

OUTCOME_STYLES = {
    "succeeded": "#4cb050",
    "acquired": "#29b6f6",
    "skipped": "#8a8a8a",
    "failed": "#ffa040",
    "lock_lost": "#c18cff",
}


def run_fields(run: Run, zone: tzinfo | None = None) -> Table:
    """Every field of the run as a two-column grid (times in `zone`, named in the title)."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    duration = times.took(run.finished_at - run.started_at) if run.finished_at else "still running"
    lock = " · ".join(x for x in (run.strategy, run.lock_key and f"key {run.lock_key}") if x)
    trigger = f"{run.trigger} by {run.actor}" if run.actor else run.trigger
    rows: list[tuple[str, object]] = [
        ("slot", times.stamp(run.slot, zone=False, tz=zone)),
        ("run", f"#{run.id} · {trigger}" if run.id is not None else trigger),
        ("instance", f"{run.instance} (host {run.host}, pid {run.pid})"),
        ("outcome", Text(run.outcome, style=OUTCOME_STYLES.get(run.outcome, ""))),
        ("started", times.stamp(run.started_at, ms=True, zone=False, tz=zone)),
        (
            "finished",
            times.stamp(run.finished_at, ms=True, zone=False, tz=zone)
            if run.finished_at
            else "— (running)",
        ),
        ("duration", duration),
        ("exit code", run.exit_code),
        ("message", run.message),
        ("lock", lock or None),
        ("fencing token", run.fencing_token),
        ("session id", run.session_id),
    ]
    for label, value in rows:
        if isinstance(value, Text):
            cell = clean(value)
        elif label == "message" and value is not None:  # a job's output: its lines kept
            cell = Text(printable_lines(redact(str(value))))
        else:
            cell = data_text("—" if value is None else value)
        grid.add_row(label, cell)
    return grid


def slot_attempts(run: Run, slot_runs: list[Run], zone: tzinfo | None = None) -> Table:
    """Every attempt of the slot in start order, this run marked."""
    table = Table(box=None, padding=(0, 1), show_edge=False, header_style="bold")
    for name in ("", "instance", "outcome", "started", "took"):
        table.add_column(name, no_wrap=True)
    for other in sorted(slot_runs, key=lambda r: (r.started_at, r.id or 0)):
        took = times.took(other.finished_at - other.started_at) if other.finished_at else "…"
        table.add_row(
            "▶" if other == run else "",
            data_text(other.instance, limit=40),
            Text(other.outcome, style=OUTCOME_STYLES.get(other.outcome, "")),
            times.stamp(other.started_at, ms=True, zone=False, tz=zone)[11:],  # clock, to the ms
            took,
        )
    return table


class RunDetailScreen(ModalScreen[None]):
    """Every field of one run, and who else tried in its slot."""

    DEFAULT_CSS = """
    RunDetailScreen { align: center middle; }
    RunDetailScreen > #dialog {
        width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    RunDetailScreen #body { height: auto; max-height: 100%; }
    RunDetailScreen Footer { dock: bottom; }
    RunDetailScreen .heading { text-style: bold; margin-top: 1; }
    RunDetailScreen #title { text-style: bold; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="run_detail_close"),
        # a modal sees no app keys: q quits from here too, as on every screen
        Binding("q", "app.quit", "Quit", id="quit_from_modal"),
    ]

    def __init__(
        self,
        run: Run,
        slot_runs: list[Run],
        zone: tzinfo | None = None,
        output: Callable[[int], RunOutput | None] | None = None,
    ) -> None:
        super().__init__()
        self.run = run
        self.zone = zone
        self.slot_runs = list(slot_runs) or [run]
        self.output = output  # reads the run's kept output (None: not shown)

    def compose(self) -> ComposeResult:
        run = self.run
        with Vertical(id="dialog"):
            slot = times.stamp(run.slot, tz=self.zone)  # the zone named once, here
            title = f"Run of {run.job} on {run.instance} · slot {slot}"
            yield Static(shown(title), id="title", markup=False)
            with VerticalScroll(id="body"):
                yield Static(run_fields(run, self.zone), id="fields")
                got = sum(r.outcome != "skipped" for r in self.slot_runs)
                note = f" · {got} got the lock" if got > 1 else ""
                yield Static(
                    f"Attempts in this slot ({len(self.slot_runs)}){note}",
                    classes="heading",
                    markup=False,
                )
                yield Static(slot_attempts(run, self.slot_runs, self.zone), id="attempts")
                if self.output is not None and run.id is not None:
                    yield RunOutputView(self.output, run.id)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#body", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
