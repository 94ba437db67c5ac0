"""The picture of a night: every attempt of one job in its recent slots, one lane per instance.

    TimelineScreen(snapshot, job, now=...)

Slots are stacked newest first; in each, a run is a bar from started_at to finished_at (a
running one reaches `now`) on a time axis shared by every slot (offset from the slot's start),
scaled to the screen's width; a skipped attempt is a small mark. When more than one instance
got the lock in a slot (a double run) its bars are red; lock_lost and failed have their own
colours. Up/down move between slots, left/right between the runs of a slot, Enter opens the
run, w tells the selected slot's story (screens/story.py), Escape goes back. It opens on the
newest slot and redraws with every refresh of the dashboard (show_snapshot), keeping the slot
selected.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo

from rich.text import Text
from textual.app import ComposeResult, RenderResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from lockconsole.model.jobs import GOT_LOCK, Run
from lockconsole.model.verdict import slot_status
from lockconsole.model.views import Snapshot
from lockconsole.text import times
from lockconsole.text.safe import clean, pad, shown
from lockconsole.tui.screens.run_detail import RunDetailScreen

MAX_SLOTS = 60
DETAIL_WIDTH = 400  # terminal cells of the detail line at most (a long message ends in "…")
TAIL = 18  # " 10m12s lock lost "
STEPS = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
STYLES = {
    "double": "bold #ff3b3b",
    "succeeded": "#4cb050",
    "acquired": "#29b6f6",
    "lock_lost": "#c18cff",
    "failed": "#ffa040",
    "skipped": "#8a8a8a",
}
# a glyph per state, so the lanes read without colour (NO_COLOR) too
GLYPHS = {
    "double": "▓",
    "succeeded": "█",
    "acquired": "▒",
    "lock_lost": "░",
    "failed": "╳",
    "skipped": "│",
}
LABELS = {"succeeded": "ok", "acquired": "running", "lock_lost": "lock lost"}
STATUS = {
    "double_run": ("DOUBLE RUN", STYLES["double"]),
    "ok": ("ok", STYLES["succeeded"]),
    "retried": ("retried: ok after a failed try", STYLES["succeeded"]),
    "skipped": ("skipped", STYLES["skipped"]),
    "running": ("running", STYLES["acquired"]),
    "missed": ("MISSED: no instance ran", "bold #ffd740"),
    "lock_lost": ("LOCK LOST", "bold " + STYLES["lock_lost"]),
    "failed": ("FAILED", "bold " + STYLES["failed"]),
}


class Layout:
    """The shared geometry of the axis and the lanes at one width."""

    def __init__(self, instances: list[str], span: float) -> None:
        self.label = min(max([5, *(len(i) for i in instances)]), 12)
        self.span = span

    def bar_width(self, width: int) -> int:
        return max(10, width - self.label - 3 - TAIL)

    def column(self, when: timedelta, bar: int) -> int:
        return min(bar - 1, int(self.fraction(when) * bar))

    def end_column(self, when: timedelta, bar: int) -> int:
        """The column after a bar ending at `when` (rounded up: a bar never falls short)."""
        return min(bar, math.ceil(self.fraction(when) * bar))

    def fraction(self, when: timedelta) -> float:
        return max(0.0, when.total_seconds()) / self.span

    def ticks(self, bar: int) -> list[tuple[int, str]]:
        most = max(2, bar // 8)
        step = next((s for s in STEPS if self.span / s <= most), STEPS[-1])
        out, t = [], 0
        while t <= self.span:
            out.append((self.column(timedelta(seconds=t), bar), "+" + _short(t)))
            t += step
        return out


def _short(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    return f"{int(seconds)}s"


class Axis(Widget):
    """+0 … +15m above the lanes."""

    DEFAULT_CSS = "Axis { height: 1; color: $text-muted; padding-right: 1; }"

    def __init__(self, layout: Layout) -> None:
        super().__init__()
        self.geometry = layout

    def render(self) -> RenderResult:
        g = self.geometry
        bar = g.bar_width(self.size.width)
        line = [" "] * (g.label + 2 + bar + 1)
        for col, label in g.ticks(bar):
            start = min(g.label + 2 + col, len(line) - len(label))
            if line[start] == " " and (start == 0 or line[start - 1] == " "):
                line[start : start + len(label)] = list(label)
        return Text("".join(line))


class SlotBlock(Widget):
    """One slot: a heading line and one lane per instance."""

    DEFAULT_CSS = """
    SlotBlock { height: auto; margin-bottom: 1; }
    SlotBlock.-selected { background: $boost; }
    """

    def __init__(
        self, screen: TimelineScreen, slot: datetime, runs: list[Run], status: str
    ) -> None:
        super().__init__()
        self.owner = screen
        self.slot = slot
        self.runs = runs
        self.status = status
        self.styles.height = 1 + len(screen.instances)

    def _kind(self, run: Run) -> str:
        if self.status == "double_run" and run.outcome in GOT_LOCK:
            return "double"
        return run.outcome

    def _style(self, run: Run) -> str:
        return STYLES.get(self._kind(run), "")

    def heading(self) -> Text:
        selected = self.has_class("-selected")
        got = [r for r in self.runs if r.outcome in GOT_LOCK]
        skipped = sum(r.outcome == "skipped" for r in self.runs)
        label, style = STATUS.get(self.status, (self.status, ""))
        text = Text.assemble(("▶ " if selected else "  ", "bold"))
        text.append(times.stamp(self.slot, tz=self.owner.zone), style="bold" if selected else "")
        text.append("  ")
        text.append(label, style=style)
        if self.status == "double_run":
            text.append(f" · {len(got)} instances got the lock", style=style)
        elif got:
            text.append(" · " + ", ".join(r.instance for r in got) + " got the lock", style="dim")
        if skipped:
            text.append(f", {skipped} skipped", style="dim")
        if self.runs and self.runs[0].trigger == "manual":
            text.append(" · manual", style="dim")
        return text

    def lane(self, instance: str, bar: int) -> Text:
        g, now = self.owner.geometry, self.owner.now
        cells: list[tuple[str, str]] = [(" ", "")] * bar
        for col, _ in g.ticks(bar):
            cells[col] = ("·", "grey30")
        mine = [r for r in self.runs if r.instance == instance]
        for run in mine:
            start = g.column(run.started_at - self.slot, bar)
            if run.outcome == "skipped":
                cells[start] = (GLYPHS["skipped"], STYLES["skipped"])
                continue
            end = g.end_column((run.finished_at or now) - self.slot, bar)
            glyph = GLYPHS.get(self._kind(run), "█")
            for col in range(start, max(end, start + 1)):
                cells[col] = (glyph, self._style(run))
        chosen = self.owner.selected_run() if self.has_class("-selected") else None
        is_chosen = chosen is not None and chosen.instance == instance
        text = Text(" ")
        text.append(pad(shown(instance), g.label), style="reverse bold" if is_chosen else "")
        text.append(" ")
        for char, style in cells:
            text.append(char, style=style)
        if mine:
            run = chosen if is_chosen and chosen in mine else mine[-1]
            took = times.took((run.finished_at or now) - run.started_at)
            label = LABELS.get(run.outcome, run.outcome)
            text.append(f" {took:>7} ")
            text.append(f"{label:<9}", style=self._style(run))
        else:
            text.append(f" {'':>7} ")
            text.append("—", style="dim")
        return text

    def render(self) -> RenderResult:
        bar = self.owner.geometry.bar_width(self.size.width)
        lines = [self.heading()] + [self.lane(i, bar) for i in self.owner.instances]
        width = self.size.width
        for line in lines:  # one row each: a heading that wrapped would push the last lane out
            line.truncate(width, overflow="ellipsis")
        return Text("\n").join(clean(line) for line in lines)  # each line shown as data


class TimelineScreen(Screen[None]):
    """Every attempt of one job in its recent slots, drawn as bars per instance."""

    DEFAULT_CSS = """
    TimelineScreen #tl-title { text-style: bold; background: $panel; padding: 0 1; }
    TimelineScreen #tl-lanes { scrollbar-gutter: stable; scrollbar-size-vertical: 1; }
    TimelineScreen #tl-detail { padding: 0 1; height: 1; }
    TimelineScreen #tl-legend { padding: 0 1; height: 1; }
    TimelineScreen #tl-empty { padding: 1 2; color: $text-muted; }
    """
    BINDINGS = [
        Binding("up,k", "slot(-1)", "Newer", id="timeline_newer"),
        Binding("down,j", "slot(1)", "Older", id="timeline_older"),
        Binding("left,h", "run(-1)", "Prev run", id="timeline_previous_run"),
        Binding("right,l", "run(1)", "Next run", id="timeline_next_run"),
        Binding("enter", "open_run", "Details", id="timeline_open_run"),
        Binding("w", "story", "Story", id="timeline_story"),
        Binding("escape", "back", "Back", id="timeline_back"),
    ]

    def __init__(
        self,
        snapshot: Snapshot,
        job: str,
        *,
        now: datetime,
        slot: datetime | None = None,
        zone: tzinfo | None = None,
        story: Callable[[str, datetime], None] | None = None,
    ) -> None:
        super().__init__()
        self.job = job
        self.zone = zone
        self.open_story = story  # tells a slot's story (None: not offered)
        self._load(snapshot, now)
        wanted = self.slots.index(slot) if slot in self.slots else None
        self.selected = wanted if wanted is not None else 0  # the newest slot
        self.run_index = self._first_run(self.selected)

    def _load(self, snapshot: Snapshot, now: datetime) -> None:
        """The slots, runs, lanes and axis of `snapshot` at `now`."""
        self.now = now
        runs = [r for r in snapshot.runs if r.job == self.job]
        by_slot: dict[datetime, list[Run]] = defaultdict(list)
        for run in runs:
            by_slot[run.slot].append(run)
        reports = {r.slot: r.status for r in snapshot.slots if r.job == self.job}
        self.slots = sorted(set(by_slot) | set(reports), reverse=True)[:MAX_SLOTS]
        self.slot_runs = {
            s: sorted(by_slot.get(s, []), key=lambda r: (r.started_at, r.id or 0))
            for s in self.slots
        }
        self.status = {
            s: reports.get(s) or slot_status(self.slot_runs[s], now, due=False) for s in self.slots
        }
        self.instances = sorted({r.instance for s in self.slots for r in self.slot_runs[s]})
        ends = [(r.finished_at or now) - s for s in self.slots for r in self.slot_runs[s]]
        span = max([60.0, *(e.total_seconds() for e in ends)])
        self.geometry = Layout(self.instances, span)

    async def show_snapshot(self, snapshot: Snapshot, now: datetime) -> None:
        """Redraw from a newer snapshot (the dashboard's refresh), keeping the selected slot."""
        before = self.slots[self.selected] if self.slots else None
        run = self.selected_run()
        self._load(snapshot, now)
        self.selected = self.slots.index(before) if before in self.slots else 0
        runs = self.slot_runs[self.slots[self.selected]] if self.slots else []
        self.run_index = runs.index(run) if run in runs else self._first_run(self.selected)
        await self.recompose()
        self._select(self.selected, self.run_index)

    def _first_run(self, index: int) -> int:
        runs = self.slot_runs[self.slots[index]] if self.slots else []
        return next((i for i, r in enumerate(runs) if r.outcome in GOT_LOCK), 0)

    def selected_run(self) -> Run | None:
        if not self.slots:
            return None
        runs = self.slot_runs[self.slots[self.selected]]
        return runs[self.run_index] if runs else None

    def compose(self) -> ComposeResult:
        count = f"{len(self.slots)} slot" + ("" if len(self.slots) == 1 else "s")
        yield Static(
            shown(f"Timeline · {self.job} · {count} · now {times.stamp(self.now, tz=self.zone)}"),
            id="tl-title",
            markup=False,
        )
        if not self.slots:
            yield Static(
                shown(f"No runs of {self.job} in the ledger's lookback window."),
                id="tl-empty",
                markup=False,
            )
        else:
            yield Axis(self.geometry)
            with VerticalScroll(id="tl-lanes", can_focus=False):
                for s in self.slots:
                    yield SlotBlock(self, s, self.slot_runs[s], self.status[s])
            yield Static(id="tl-detail", markup=False)
            yield Static(legend(), id="tl-legend")
        yield Footer()

    def on_mount(self) -> None:
        self._select(self.selected, self.run_index)

    def _select(self, index: int, run_index: int) -> None:
        if not self.slots:
            return
        self.selected, self.run_index = index, run_index
        blocks = list(self.query(SlotBlock))
        for i, block in enumerate(blocks):
            block.set_class(i == index, "-selected")
            block.refresh()
        lanes = self.query_one("#tl-lanes", VerticalScroll)
        # after the next layout: before it, the blocks have no place to scroll to
        self.call_after_refresh(lanes.scroll_to_widget, blocks[index], animate=False)
        self.query_one("#tl-detail", Static).update(self._detail())

    def _detail(self) -> Text:
        run = self.selected_run()
        if run is None:
            return Text("no attempt in this slot", style="dim")
        end = times.clock(run.finished_at, self.now, self.zone) if run.finished_at else "now"
        took = times.took((run.finished_at or self.now) - run.started_at)
        text = Text(f"{run.instance} ", style="bold")
        text.append(LABELS.get(run.outcome, run.outcome), style=STYLES.get(run.outcome, ""))
        text.append(f" · {times.clock(run.started_at, self.now, self.zone)}–{end} ({took})")
        if run.exit_code is not None:
            text.append(f" · exit {run.exit_code}")
        if run.message:
            text.append(f" · {run.message}", style="dim")
        return clean(text, limit=DETAIL_WIDTH)

    def action_slot(self, step: int) -> None:
        if self.slots:
            index = min(max(self.selected + step, 0), len(self.slots) - 1)
            self._select(index, self._first_run(index))

    def action_run(self, step: int) -> None:
        if self.slots:
            runs = self.slot_runs[self.slots[self.selected]]
            self._select(self.selected, (self.run_index + step) % max(len(runs), 1))

    def action_open_run(self) -> None:
        run = self.selected_run()
        if run is not None:
            runs = self.slot_runs[self.slots[self.selected]]
            self.app.push_screen(RunDetailScreen(run, runs, self.zone))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the story is offered (in the footer too) when the opener can tell one
        return self.open_story is not None if action == "story" else True

    def action_story(self) -> None:
        if not self.slots or self.open_story is None:
            self.notify("No slot to tell", severity="warning")
            return
        self.open_story(self.job, self.slots[self.selected])

    def action_back(self) -> None:
        self.dismiss(None)


def legend() -> Text:
    marks = (
        ("ok", "succeeded"),
        ("running", "acquired"),
        ("double run", "double"),
        ("lock lost", "lock_lost"),
        ("failed", "failed"),
        ("skipped", "skipped"),
    )
    return Text("  ").join(Text.assemble((GLYPHS[k], STYLES[k]), " " + label) for label, k in marks)
