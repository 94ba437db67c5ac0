"""The story of one slot: one chronological account, its alerts, duplicate keys and verdict.

    StoryScreen(facade, job, slot, zone=zone, travel=callback)
        Enter opens the selected line (an attempt: the run with its output tail; an audit entry:
        every field), b sets the dashboard's clock back to the selected line's moment (or the
        slot's), r reads the story again, Escape goes back
    story_lines(story, zone)    the account's lines, oldest first (pure)
    story_end(story)            the alerts, the duplicate keys, what could not be read (a line each)
    story_verdict(story)        the verdict, last, whole

The story is read by `ConsoleFacade.story` in a thread worker, never on the UI thread. Every text
from a database is data (`sync_table`, `data_text`): never markup, control characters shown as
escapes. Times are in the console's zone, named once in the title. A part of the story that could
not be read is said to be unknown, with why, never shown as empty.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from lockconsole.model.jobs import Run
from lockconsole.model.story import events
from lockconsole.model.views import AuditEntry, JournalEntry, SlotStory
from lockconsole.text.safe import data_text, shown
from lockconsole.text.times import stamp, zone_label
from lockconsole.tui.nocolor import ALARM
from lockconsole.tui.past import seen_span
from lockconsole.tui.widgets.tables import sync_table

if TYPE_CHECKING:
    from lockconsole.backends.ledger.outputs import RunOutput
    from lockconsole.console.protocol import ConsoleFacade

STORY_COLUMNS = ("AT", "SOURCE", "WHO", "WHAT")
DUPLICATES_SHOWN = 3  # duplicate keys named in the end part; the rest are counted
STATUS_STYLE = {
    "double_run": ALARM,
    "missed": ALARM,
    "lock_lost": ALARM,
    "failed": ALARM,
    "ok": "green",
    "retried": "green",
    "running": "cyan",
}
SOURCE_STYLE = {"attempt": "", "holder": "magenta", "foreign": "bold magenta", "audit": "yellow"}


@dataclass(frozen=True)
class StoryLine:
    """One line of the account: what the events table shows, and what it opens."""

    key: str
    at: datetime | None  # None: a part that could not be read (no moment)
    source: str
    who: str
    what: str
    run: Run | None = None
    audit: AuditEntry | None = None
    holder: JournalEntry | None = None


def is_foreign(h: JournalEntry) -> bool:
    """A holder outside lockconsole's runner: its application does not name lockconsole."""
    return not (h.application or "").startswith("lockconsole")


def story_lines(story: SlotStory, zone: tzinfo | None = None) -> list[StoryLine]:
    """The account, oldest first, in the words of the one telling (`model.story.events`): each
    attempt's start and end, each holder the journal saw (its seen-interval in `zone`) and when
    it was gone, each audit entry; each line knows the run, holding or entry it tells of. A part
    that could not be read is a line of its own, "unknown", at the top."""
    bare = replace(story, attempts=(), holders=(), audit=())
    lines: list[StoryLine] = []
    for run in story.attempts:
        for i, ev in enumerate(events(replace(bare, attempts=(run,)))):
            key = f"run:{run.id}:{'start' if i == 0 else 'end'}"
            lines.append(StoryLine(key, ev.at, "attempt", ev.who, ev.what, run=run))
    for h in story.holders:
        source = "foreign" if is_foreign(h) else "holder"
        for ev in events(replace(bare, holders=(h,))):
            if ev.at == h.first_seen and ev.what.startswith("held "):  # its seen-interval in zone
                what = f"held {h.key} ({seen_span(h, story.slot, zone)})"
                what += " · outside lockconsole" if source == "foreign" else ""
                lines.append(StoryLine(f"holder:{h.id}", ev.at, source, ev.who, what, holder=h))
            else:
                lines.append(StoryLine(f"gone:{h.id}", ev.at, source, ev.who, ev.what, holder=h))
    for e in story.audit:
        for ev in events(replace(bare, audit=(e,))):
            key = f"audit:{e.database}:{e.id}"
            lines.append(StoryLine(key, ev.at, "audit", ev.who, ev.what, audit=e))
    lines.sort(key=lambda line: (line.at or story.slot, line.key))
    unknown = [
        StoryLine(f"unknown:{i}", None, "unknown", part, f"unknown: {why}")
        for i, (part, why) in enumerate(story.unknown)
    ]
    return unknown + lines


def _at(value: datetime | None, slot: datetime, zone: tzinfo | None) -> str:
    """A line's time to the millisecond, in `zone`; with the date when not the slot's day."""
    if value is None:
        return "?"
    full = stamp(value, ms=True, zone=False, tz=zone)  # '2026-11-27 02:00:00.300'
    same_day = full[:10] == stamp(slot, zone=False, tz=zone)[:10]
    return full[11:] if same_day else full[5:]


def story_rows(story: SlotStory, zone: tzinfo | None = None) -> list[tuple[str, list[Any]]]:
    """(row key, cells) of the account's lines, for `sync_table` (which shows them as data)."""
    rows: list[tuple[str, list[Any]]] = []
    for line in story_lines(story, zone):
        style = ALARM if line.source == "unknown" else SOURCE_STYLE.get(line.source, "")
        label = "⚠ unknown" if line.source == "unknown" else line.source
        rows.append(
            (line.key, [_at(line.at, story.slot, zone), Text(label, style=style), line.who,
                        line.what])
        )  # fmt: skip
    return rows


def _unknown(story: SlotStory, *prefixes: str) -> list[str]:
    """Why each part named by `prefixes` could not be read."""
    return [f"{part}: {why}" for part, why in story.unknown if part.startswith(prefixes)]


def story_end(story: SlotStory) -> Text:
    """The end of the story before its verdict: the alerts it raised, the duplicate keys that
    carry its run ids, the parts that could not be read; a line each (cut with '…', so the
    verdict stays in view at 80x24). Every text from a database is data."""
    text = Text()
    text.append("Alerts: ", style="bold")
    if story.alerts:
        text.append(f"{len(story.alerts)}\n")
        for alert in story.alerts:
            text.append("  ✖ ", style=ALARM)
            text.append(shown(alert.message) + "\n")
    else:
        text.append("none\n", style="dim")
    text.append("Duplicate keys: ", style="bold")
    dupes_unknown = _unknown(story, "idempotency")
    if dupes_unknown:
        text.append("unknown: " + shown("; ".join(dupes_unknown)) + "\n", style=ALARM)
    elif story.duplicates:
        surplus = sum(g.count - 1 for g in story.duplicates)
        text.append(
            f"{len(story.duplicates)} keys ({surplus} surplus rows) carry its run ids: ",
            style=ALARM,
        )
        named = [
            f"({', '.join(map(shown, g.key))}) ×{g.count}"
            for g in story.duplicates[:DUPLICATES_SHOWN]
        ]
        more = len(story.duplicates) - DUPLICATES_SHOWN
        text.append(", ".join(named) + (f" and {more} more" if more > 0 else "") + "\n")
    else:
        text.append("none found\n", style="dim")
    if story.unknown:
        text.append("Unknown: ", style=ALARM)
        text.append(shown("; ".join(f"{part} ({why})" for part, why in story.unknown)) + "\n")
    text.rstrip()
    return text


def story_verdict(story: SlotStory) -> Text:
    """The verdict, whole: exactly once, retried, double run with its overlap, missed, and why."""
    text = Text("Verdict: ", style="bold")
    text.append(shown(story.verdict or story.status), style=STATUS_STYLE.get(story.status, "bold"))
    if story.unknown:
        text.append(" (told without the parts that could not be read)", style="dim")
    return text


def story_output(story: SlotStory) -> Callable[[int], RunOutput | None]:
    """The output tail of a run of the story, as the run detail reads one (what the story
    kept; an output that could not be read raises, and the run detail says so)."""
    from lockconsole.backends.ledger.outputs import RunOutput

    kept = dict(story.outputs)
    runs = {r.id: r for r in story.attempts}

    def read(run_id: int) -> RunOutput | None:
        failed = _unknown(story, f"output of run {run_id}")
        if failed:
            raise RuntimeError("unknown: " + "; ".join(failed))
        run = runs.get(run_id)
        if run is None or run_id not in kept:
            return None
        return RunOutput(run_id, run.job, run.outcome, kept[run_id])

    return read


class StoryScreen(Screen[None]):
    """One slot's story, read in a worker, newest facts at the end."""

    DEFAULT_CSS = """
    StoryScreen #story-title {
        text-style: bold; background: $panel; padding: 0 1;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    StoryScreen #story-events { height: 1fr; min-height: 4; }
    StoryScreen #story-detail { height: auto; max-height: 2; padding: 0 1; color: $text-muted; }
    StoryScreen #story-end {
        height: auto; max-height: 8; padding: 0 1; border-top: solid $panel-lighten-2;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    StoryScreen #story-verdict { height: auto; max-height: 6; padding: 0 1; }
    """
    BINDINGS = [
        # Enter too: the table takes it first and selects the row (on_data_table_row_selected)
        Binding("i", "open", "Open", id="story_open"),
        Binding("b", "travel", "Travel there", id="story_travel"),
        Binding("r", "reload", "Reload", id="story_reload"),
        Binding("escape", "back", "Back", id="story_back"),
    ]

    def __init__(
        self,
        facade: ConsoleFacade,
        job: str,
        slot: datetime,
        *,
        zone: tzinfo | None = None,
        travel: Callable[[datetime, str], None] | None = None,
    ) -> None:
        super().__init__()
        self.facade = facade
        self.job = job
        self.slot = slot
        self.zone = zone
        self.travel = travel  # sets the dashboard's clock back (None: not offered)
        self.story: SlotStory | None = None
        self.lines: dict[str, StoryLine] = {}

    def compose(self) -> ComposeResult:
        yield Static(self._title(), id="story-title", markup=False)
        yield DataTable(id="story-events", cursor_type="row", zebra_stripes=True)
        yield Static(id="story-detail", markup=False)
        yield Static(Text("reading the story…", style="dim"), id="story-end")
        yield Static(id="story-verdict")
        yield Footer()

    def _title(self) -> str:
        slot = stamp(self.slot, zone=False, tz=self.zone)
        text = f"Story · {self.job} · slot {slot} · times {zone_label(self.zone)}"
        if self.story is not None:
            text += f" · ledger {self.story.ledger}"
        return shown(text)

    def on_mount(self) -> None:
        table = self.query_one("#story-events", DataTable)
        for column in STORY_COLUMNS:
            table.add_column(column, key=column)
        table.fixed_columns = 1  # when stays in view as the table scrolls right
        table.loading = True
        table.focus()
        self._load()

    def action_reload(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="story", exit_on_error=False)
    def _load(self) -> None:
        try:
            story: SlotStory | None = self.facade.story(self.job, self.slot)
            error = ""
        except Exception as exc:  # the whole story could not be read: said, not raised
            story, error = None, " ".join(str(exc).split()) or type(exc).__name__
        self.app.call_from_thread(self._show, story, error)

    def _show(self, story: SlotStory | None, error: str) -> None:
        if not self.is_attached:  # closed while the story was read: nothing to show it on
            return
        table = self.query_one("#story-events", DataTable)
        table.loading = False
        end = self.query_one("#story-end", Static)
        if story is None:
            text = Text("The story is unknown: it could not be read: ", style=ALARM)
            text.append(shown(error))
            end.update(text)
            return
        self.story = story
        self.lines = {line.key: line for line in story_lines(story, self.zone)}
        sync_table(table, story_rows(story, self.zone))
        count = f"{len(story.attempts)} attempt" + ("" if len(story.attempts) == 1 else "s")
        table.border_title = count
        self.query_one("#story-title", Static).update(self._title())
        end.update(story_end(story))
        self.query_one("#story-verdict", Static).update(story_verdict(story))
        self._detail()

    # --- the selected line -------------------------------------------------------------

    def selected_line(self) -> StoryLine | None:
        table = self.query_one("#story-events", DataTable)
        if not table.row_count:
            return None
        key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self.lines.get(str(key.value))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail()

    def _detail(self) -> None:
        line = self.selected_line()
        text = Text()
        if line is not None:
            text = data_text(f"{line.who}: {line.what}", limit=600)
            if line.run is not None:
                text.append("  (enter: the run and its output)", style="dim")
            elif line.audit is not None:
                text.append("  (enter: every field)", style="dim")
        self.query_one("#story-detail", Static).update(text)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_open()

    def action_open(self) -> None:
        """The selected line in full: an attempt's run with its output, an audit entry."""
        line, story = self.selected_line(), self.story
        if line is None or story is None:
            return
        if line.run is not None:
            from lockconsole.tui.screens.run_detail import RunDetailScreen

            screen = RunDetailScreen(line.run, list(story.attempts), self.zone, story_output(story))
            self.app.push_screen(screen)
        elif line.audit is not None:
            from lockconsole.tui.screens.audit import AuditDetailScreen

            self.app.push_screen(AuditDetailScreen(line.audit, zone=self.zone))

    def moment(self) -> datetime:
        """The moment b goes back to: the selected line's, else the slot's."""
        line = self.selected_line()
        return line.at if line is not None and line.at is not None else self.slot

    def action_travel(self) -> None:
        if self.travel is None:
            self.notify("Time travel is the dashboard's: open the story from there")
            return
        at = self.moment()
        self.travel(at, f"the story of {self.job} {stamp(self.slot, tz=self.zone)}")

    def action_back(self) -> None:
        self.dismiss(None)
