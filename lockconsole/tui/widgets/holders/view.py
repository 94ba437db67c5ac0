"""The lock holders view: a Line API widget that paints only the visible rows.

A refresh swaps in rows laid out by the worker (`HolderRows`), keeps the cursor on the same
holder (by row key) and repaints the visible lines: its UI-thread cost does not grow with the
number of holders. The stock DataTable takes seconds to load 10,000 rows; this does not load.
The column `<` / `>` chose (`chosen`, what the sort key sorts by) is painted in reverse video
in the headings.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from lockconsole.model.views import Holder
from lockconsole.text.safe import pad, shown
from lockconsole.text.times import age
from lockconsole.tui.widgets.holders.rows import (
    AGE_FIELD,
    COLUMNS,
    FIELDS,
    FIXED,
    MAX_WIDTHS,
    GroupBy,
    HolderRow,
    HolderRows,
    SortBy,
)
from lockconsole.tui.widgets.tables import row_cursor_keys, step_column


class Columns:
    """The columns one grouping shows: which cells, how wide (from the data), the header line
    (the sorted column marked ▲ or ▼), and how many cells on the left stay when scrolling."""

    def __init__(
        self,
        group_by: GroupBy,
        widths: Mapping[str, int] | None = None,
        sort: SortBy = None,
    ) -> None:
        names = COLUMNS[group_by]
        sizes = {n: len(n) for n in FIELDS} | dict(widths or MAX_WIDTHS)
        if sort is not None and sort[0] in names:
            sizes[sort[0]] = max(sizes[sort[0]], len(sort[0]) + 2)
        self.names = names
        self.picks = tuple((FIELDS.index(n), sizes[n]) for n in names)
        self.width = sum(w for _, w in self.picks) + len(names)
        self.fixed_width = sum(w + 1 for _, w in self.picks[: FIXED[group_by]])
        marks = {n: n for n in FIELDS}
        if sort is not None:
            marks[sort[0]] = f"{sort[0]} {'▼' if sort[1] else '▲'}"
        self.header = self.line(tuple(marks[n] for n in FIELDS))

    def span(self, name: str) -> tuple[int, int] | None:
        """Where column `name` is in a line (start, end), or None if this grouping lacks it."""
        start = 0
        for (_, width), shown_name in zip(self.picks, self.names, strict=True):
            if shown_name == name:
                return start, start + width
            start += width + 1
        return None

    def line(self, cells: tuple[str, ...]) -> str:
        """One line of exactly `width` cells: each cell cut ('…') or padded by terminal cells,
        so wide characters and long names never shift the columns after them."""
        if len(cells) == 1:  # a group header
            return pad(cells[0], self.width)
        return " ".join(pad(cells[i], w) for i, w in self.picks) + " "


class HoldersView(ScrollView, can_focus=True):
    """Every holder and waiter, grouped by job or by session, with a row cursor."""

    BINDINGS = row_cursor_keys("jump(0)", "jump(-1)", "screen.describe", "Describe")
    COMPONENT_CLASSES = {
        "holders-view--header",
        "holders-view--group",
        "holders-view--cursor",
        "holders-view--waiting",
        "holders-view--stale",
        "holders-view--unmapped",
    }
    DEFAULT_CSS = """
    HoldersView { height: 1fr; }
    HoldersView > .holders-view--header { text-style: bold; background: $panel; }
    HoldersView > .holders-view--group { text-style: bold; color: $accent; }
    HoldersView > .holders-view--cursor { background: $block-cursor-background;
                                          color: $block-cursor-foreground; }
    HoldersView:blur > .holders-view--cursor { background: $block-cursor-blurred-background; }
    HoldersView > .holders-view--waiting { color: $warning; }
    HoldersView > .holders-view--stale { color: $text-error; text-style: bold; }
    HoldersView > .holders-view--unmapped { color: $text-secondary; text-style: italic; }
    /* NO_COLOR: the glyph tells the state; the text keeps the full contrast of the theme */
    HoldersView.-monochrome > .holders-view--waiting { color: $text; text-style: bold; }
    HoldersView.-monochrome > .holders-view--stale { color: $text; text-style: bold; }
    HoldersView.-monochrome > .holders-view--unmapped { color: $text; text-style: bold italic; }
    """

    cursor = reactive(0, layout=False, repaint=False)
    dimmed = reactive(False)

    class CursorMoved(Message):
        def __init__(self, holder: Holder | None) -> None:
            self.holder = holder
            super().__init__()

    def __init__(self, *, clock: Callable[[], datetime] | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.model = HolderRows()
        self.clock = clock or (lambda: datetime.now(UTC))
        self.columns = Columns("job")
        self.virtual_size = Size(self.columns.width, 1)
        self._styles: dict[str, Style] = {}
        self.painted = 0  # lines painted since mount (for measurements)
        self._on_screen: dict[int, tuple[str, str]] = {}  # y -> (text, style name) last painted
        self.chosen: str | None = None  # the column `<` / `>` picked: what the sort key sorts
        self.hides = False  # a database notes holders it cannot show (show_notes)
        self._subtitle = ""

    # --- data --------------------------------------------------------------------------

    def show(self, model: HolderRows) -> None:
        """Swap in new rows; the cursor stays on the same row key when it is still there."""
        old = self.model
        kept = None
        if old.rows and 0 <= self.cursor < len(old.rows):
            kept = model.index.get(old.rows[self.cursor].key)
        self.model = model
        if (old.widths, old.group_by, old.sort) != (model.widths, model.group_by, model.sort):
            self.columns = Columns(model.group_by, model.widths, model.sort)
        self.virtual_size = Size(self.columns.width, len(model.rows) + 1)
        if kept is not None:
            self._move(kept, notify=False)
        else:
            self._move(min(self.cursor, max(0, len(model.rows) - 1)), notify=False)
        if (
            len(model.rows) == len(old.rows)
            and (old.widths, old.group_by, old.sort) == (model.widths, model.group_by, model.sort)
            and self._unchanged()
        ):
            return  # the same lines would be painted: no repaint (most refreshes change nothing)
        self.refresh()

    def _unchanged(self) -> bool:
        """True when every visible line would be painted as it was last time."""
        on_screen = self._on_screen
        height = self.scrollable_content_region.height
        return bool(on_screen) and all(on_screen.get(y) == self._line(y) for y in range(height))

    @property
    def selected(self) -> HolderRow | None:
        rows = self.model.rows
        return rows[self.cursor] if 0 <= self.cursor < len(rows) else None

    @property
    def selected_holder(self) -> Holder | None:
        row = self.selected
        return row.holder if row is not None else None

    def show_notes(self, notes: Sequence[tuple[str, str]], group_by: GroupBy) -> None:
        """The grouping, and what the databases cannot show (their notes: the log has them
        in full), in the pane's bottom border; with notes, an empty list is "none seen"."""
        subtitle = f"by {group_by} (g)"
        if notes:
            database, note = notes[0]
            count = f"{len(notes)} notes" if len(notes) > 1 else "note"
            subtitle += f" · ⓘ {count} (o): {shown(database)}: {shown(note)}"
        if self.hides != bool(notes):
            self.hides = bool(notes)
            self._on_screen.clear()
            self.refresh()
        if self._subtitle != subtitle:  # data: a Text, never parsed as markup
            self._subtitle = subtitle
            self.border_subtitle = Text(subtitle)

    # --- cursor ------------------------------------------------------------------------

    def _landing(self, index: int, direction: int) -> int:
        """The nearest holder row from `index` in `direction` (group headers are skipped)."""
        rows = self.model.rows
        if not rows:
            return 0
        index = max(0, min(index, len(rows) - 1))
        for step in (direction, -direction):
            at = index
            while 0 <= at < len(rows):
                if rows[at].flag != "header":
                    return at
                at += step
        return index

    def _move(self, index: int, *, notify: bool = True, direction: int = 1) -> None:
        index = self._landing(index, direction)
        before = self.cursor
        self.cursor = index
        body = max(1, self.scrollable_content_region.height - 1)
        top = round(self.scroll_y)
        # keep the group header above the first holder of a group in view with it
        first = index - 1 if index > 0 and self.model.rows[index - 1].flag == "header" else index
        if first < top:
            self.scroll_to(y=first, animate=False, immediate=True)
        elif index >= top + body:
            self.scroll_to(y=index - body + 1, animate=False, immediate=True)
        if before != index:
            self.refresh()
            if notify:
                self.post_message(self.CursorMoved(self.selected_holder))

    def action_cursor(self, step: int) -> None:
        target = self._landing(self.cursor + step, step)
        if (target - self.cursor) * step > 0:  # only ever move the way the key says
            self._move(target, direction=step)

    def action_page(self, direction: int) -> None:
        step = direction * max(1, self.scrollable_content_region.height - 2)
        self._move(self.cursor + step, direction=direction)

    def action_jump(self, where: int) -> None:
        self._move(len(self.model.rows) - 1 if where < 0 else 0, direction=1 if where >= 0 else -1)

    def choose_column(self, step: int) -> str:
        """Move the chosen column one heading left or right; returns its name."""
        names = self.columns.names
        at = names.index(self.chosen) if self.chosen in names else None
        sort = self.model.sort
        sorted_at = names.index(sort[0]) if sort and sort[0] in names else None
        self.chosen = names[step_column(len(names), at, sorted_at, step)]
        self._on_screen.clear()
        self.refresh()
        return self.chosen

    def action_pan(self, step: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + step), animate=False, immediate=True)

    def on_click(self, event: object) -> None:
        y = getattr(event, "y", 0)
        if y >= 1:
            self._move(round(self.scroll_y) + y - 1)

    def watch_dimmed(self) -> None:
        self._styles.clear()
        self.refresh()

    # --- painting ----------------------------------------------------------------------

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _style(self, name: str) -> Style:
        style = self._styles.get(name)
        if style is None:
            base = self.rich_style
            style = (
                base
                if name == ""
                else base + self.get_component_rich_style(f"holders-view--{name}", partial=True)
            )
            if self.dimmed and name != "cursor":
                style += Style(dim=True)
            self._styles[name] = style
        return style

    def _line(self, y: int) -> tuple[str, str]:
        """Line y of the view as (text, style name): what render_line paints there."""
        columns = self.columns
        if y == 0:
            return columns.header, "header"
        index = self.scroll_offset.y + y - 1
        rows = self.model.rows
        if index >= len(rows):
            if not rows and y == 1:
                text = "no lock holders" if not self.model.text_filter else "no holder matches"
                if self.hides and not self.model.text_filter:  # the notes say what is hidden
                    text = "no lock holders seen; some cannot be seen here (see the note below)"
                return f"  {text}", "empty"
            return "", "blank"
        row = rows[index]
        if row.flag == "header":
            text = columns.line(row.cells)
        else:
            cells = list(row.cells)
            cells[AGE_FIELD] = ("≥" if row.at_least else "") + age(row.since, self.clock())
            text = columns.line(tuple(cells))
        name: str = "group" if row.flag == "header" else ("" if row.flag == "held" else row.flag)
        if index == self.cursor:
            name = "cursor"
        return text, name

    def render_line(self, y: int) -> Strip:
        self.painted += 1
        scroll_x = self.scroll_offset.x
        width = self.scrollable_content_region.width
        text, name = line = self._line(y)
        self._on_screen[y] = line
        if name == "blank":
            return Strip.blank(width, self._style(""))
        if name == "empty":
            return Strip([Segment(text.ljust(width), self._style("group"))], width)
        columns = self.columns
        strip = Strip([Segment(text, self._style(name))], columns.width)
        span = columns.span(self.chosen) if name == "header" and self.chosen else None
        if span is not None:  # the chosen column's heading in reverse video
            a, b = span
            style = self._style(name)
            strip = Strip(
                [
                    Segment(text[:a], style),
                    Segment(text[a:b], style + Style(reverse=True)),
                    Segment(text[b:], style),
                ],
                columns.width,
            )
        fixed = min(columns.fixed_width, width)
        if name == "group":  # a group's title does not scroll
            return strip.crop(0, width)
        # the identifying columns stay; the rest scrolls sideways behind them
        left = strip.crop(0, fixed)
        right = strip.crop(fixed + scroll_x, fixed + scroll_x + width - fixed)
        return Strip.join([left, right])
