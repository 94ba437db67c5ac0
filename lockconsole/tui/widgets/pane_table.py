"""The small panes' table (jobs, history): a Line API widget that paints only the visible rows.

A refresh swaps in a `TableModel` the refresh worker built (rows sorted, cells made safe,
columns measured: `table_model.py`); the table keeps the cursor on the same row key and
repaints only the lines on screen, so its UI-thread cost does not grow with the rows. Each
visible row's line is built once (cells padded or cut with '…' to their column, never cut
without the mark) and kept while its cells and the widths stay.

What counts on with the clock (the jobs pane's LAST and NEXT) is `live`: given a row key it
returns that row's cells now. It is asked only for the rows on screen, at paint time and on
`tick()` (once a second), and a live cell wider than its column widens the column.

Like the stock DataTable it replaces here: a row cursor (↑ ↓ PgUp PgDn, Home, End and G),
Enter or a click on the cursor's row posts `RowSelected`, ← → scroll sideways behind the first
`fixed_columns` columns, which stay, zebra stripes, and a heading line that names the sorted
column (▲ ascending, ▼ descending) and shows the column `<` / `>` chose in reverse video.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from lockconsole.tui.widgets.cells import cell_segments, over
from lockconsole.tui.widgets.table_model import (
    Cell,
    SortBy,
    TableModel,
    heading,
    safe_cell,
)
from lockconsole.tui.widgets.tables import next_sort, row_cursor_keys, step_column

Live = Callable[[str], Sequence[Cell] | None]


class PaneTable(ScrollView, can_focus=True):
    """A dashboard pane's table over a TableModel: a row cursor, identifying columns fixed."""

    BINDINGS = row_cursor_keys("first_row", "last_row", "select_row", "Select")
    COMPONENT_CLASSES = {
        "pane-table--header",
        "pane-table--even-row",
        "pane-table--odd-row",
        "pane-table--fixed",
        "pane-table--cursor",
        "pane-table--fixed-cursor",
    }
    # the stock DataTable's look: its colours, stripes, fixed columns and cursor
    DEFAULT_CSS = """
    PaneTable { background: $surface; color: $foreground; }
    PaneTable:focus { background-tint: $foreground 5%; }
    PaneTable > .pane-table--header { text-style: bold; background: $panel; color: $foreground; }
    PaneTable:focus > .pane-table--header { background-tint: $foreground 5%; }
    PaneTable:ansi > .pane-table--header { background: ansi_bright_blue; color: ansi_default; }
    PaneTable > .pane-table--even-row { background: $surface-lighten-1 50%; }
    PaneTable:dark > .pane-table--even-row { background: $surface-darken-1 40%; }
    PaneTable > .pane-table--fixed { background: $secondary-muted; color: $foreground; }
    PaneTable > .pane-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    PaneTable:focus > .pane-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    PaneTable > .pane-table--fixed-cursor {
        background: $block-cursor-blurred-background;
        color: $foreground;
    }
    PaneTable:focus > .pane-table--fixed-cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
    }
    """

    class RowSelected(Message):
        """Enter, or a click on the cursor's row."""

        def __init__(self, table: PaneTable, key: str) -> None:
            self.table = table
            self.key = key
            super().__init__()

        @property
        def control(self) -> PaneTable:
            return self.table

    def __init__(self, columns: Sequence[str], *, fixed: int = 0, id: str | None = None) -> None:
        super().__init__(id=id)
        self.names = tuple(columns)
        self.fixed_columns = fixed
        self.sort_by: SortBy = None
        self.chosen: int | None = None  # the column `<` / `>` picked: what the sort key sorts
        self.model = TableModel(widths=tuple(len(n) for n in self.names))
        self.widths = list(self.model.widths)
        self.cursor_row = 0
        self.live: Live | None = None
        self.painted = 0  # lines painted since mount (for measurements)
        self._live: dict[str, tuple[tuple[Cell, ...], tuple[Text, ...]]] = {}
        self._lines: dict[str, tuple[tuple[Text, ...], Strip]] = {}  # key -> (cells, line)
        self._header: Strip | None = None
        self._styles: dict[str, Style] = {}
        self._geometry()

    # --- data --------------------------------------------------------------------------

    def show(self, model: TableModel, *, follow_first: bool = False) -> None:
        """Swap in new rows. The cursor stays on its row key (or its position); with
        `follow_first`, a cursor on the first row stays on the first row, the view on top."""
        old = self.model
        if model is old:
            return
        key = self.selected_key
        on_first = follow_first and (not old.rows or self.cursor_row == 0)
        self.model = model
        if list(model.widths) != self.widths or model.sort != old.sort:
            self.widths = list(model.widths)
            self._geometry()
        elif len(model.rows) != len(old.rows):
            self.virtual_size = Size(self.line_width, len(model.rows) + 1)
        if on_first:
            self.cursor_row = 0
            self.scroll_to(y=0, animate=False, immediate=True)
        elif key is not None and key in model.index:
            self.cursor_row = model.index[key]
        else:
            self.cursor_row = max(0, min(self.cursor_row, len(model.rows) - 1))
        if old.rows != model.rows:
            self._live.clear()
            index = model.index
            self._lines = {k: v for k, v in self._lines.items() if k in index}
            self.refresh()

    def tick(self) -> None:
        """The clock moved on: ask `live` again for the rows on screen, repaint those that
        changed."""
        if self.live is None or not self.model.rows:
            return
        top = round(self.scroll_y)
        height = max(0, self.scrollable_content_region.height - 1)
        changed = False
        for index in range(top, min(top + height, len(self.model.rows))):
            key = self.model.rows[index].key
            before = self._live.pop(key, None)
            self._cells(index)
            after = self._live.get(key)
            if before is None or after is None or after[0] != before[0]:
                changed = True
        if changed:
            self.refresh()

    def _cells(self, index: int) -> tuple[Text, ...]:
        """Row `index`'s cells as painted now: its live cells, else the model's."""
        row = self.model.rows[index]
        if self.live is None:
            return row.cells
        seen = self._live.get(row.key)
        if seen is not None:
            return seen[1]
        raw = self.live(row.key)
        if raw is None:
            return row.cells
        raw = tuple(raw)
        cells = tuple(safe_cell(c) for c in raw)
        self._live[row.key] = (raw, cells)
        wider = False
        for i, cell in enumerate(cells[: len(self.widths)]):
            if cell.cell_len > self.widths[i]:
                self.widths[i] = cell.cell_len
                wider = True
        if wider:  # a live cell outgrew its column: widen it, never cut it unmarked
            self._geometry()
            self.refresh()
        return cells

    # --- what tests and actions read ---------------------------------------------------

    @property
    def row_count(self) -> int:
        return len(self.model.rows)

    @property
    def row_keys(self) -> list[str]:
        return [r.key for r in self.model.rows]

    @property
    def selected_key(self) -> str | None:
        """The row key under the cursor, or None for an empty table."""
        rows = self.model.rows
        return rows[self.cursor_row].key if 0 <= self.cursor_row < len(rows) else None

    def get_row_index(self, key: str) -> int:
        return self.model.index[key]

    def get_row(self, key: str) -> tuple[Text, ...]:
        """The row's cells as they are painted now (live cells included)."""
        return self._cells(self.model.index[key])

    def get_row_at(self, index: int) -> tuple[Text, ...]:
        return self._cells(index)

    def label(self, index: int) -> Text:
        """Column `index`'s heading: its sort mark, in reverse video when chosen."""
        style = "reverse" if index == self.chosen else ""
        return Text(heading(self.names[index], self.sort_by, index), style=style)

    # --- cursor and sort ---------------------------------------------------------------

    def move_cursor(self, *, row: int, scroll: bool = True) -> None:
        rows = len(self.model.rows)
        row = max(0, min(row, rows - 1)) if rows else 0
        moved = row != self.cursor_row
        self.cursor_row = row
        if scroll:
            body = max(1, self.scrollable_content_region.height - 1)
            top = round(self.scroll_y)
            if row < top:
                self.scroll_to(y=row, animate=False, immediate=True)
            elif row >= top + body:
                self.scroll_to(y=row - body + 1, animate=False, immediate=True)
        if moved:
            self.refresh()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(row=self.cursor_row + step)

    def action_page(self, direction: int) -> None:
        step = direction * max(1, self.scrollable_content_region.height - 2)
        self.move_cursor(row=self.cursor_row + step)

    def action_first_row(self) -> None:
        self.move_cursor(row=0)

    def action_last_row(self) -> None:
        self.move_cursor(row=max(0, self.row_count - 1))

    def action_select_row(self) -> None:
        key = self.selected_key
        if key is not None:
            self.post_message(self.RowSelected(self, key))

    def action_pan(self, step: int) -> None:
        self.scroll_to(x=max(0, self.scroll_x + step), animate=False, immediate=True)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = round(self.scroll_y) + offset.y - 1
        if row >= self.row_count:
            return
        event.stop()
        if row == self.cursor_row:
            self.action_select_row()
        else:
            self.move_cursor(row=row)

    def choose_column(self, step: int) -> str:
        """Move the chosen column one heading left or right; returns its name."""
        sorted_at = self.sort_by[0] if self.sort_by else None
        self.chosen = step_column(len(self.names), self.chosen, sorted_at, step)
        self._geometry()
        self.refresh()
        return self.names[self.chosen]

    def sort_chosen(self) -> SortBy:
        """Sort by the chosen column (or the sorted one, else the first): see `next_sort`.
        The caller lays the rows out again in that order."""
        column = self.chosen if self.chosen is not None else (self.sort_by or (0, False))[0]
        self.set_sort(next_sort(self.sort_by, column))
        return self.sort_by

    @property
    def sorted_by(self) -> tuple[str, bool] | None:
        """The sort by column name: (name, descending), or None."""
        return (self.names[self.sort_by[0]], self.sort_by[1]) if self.sort_by else None

    def set_sort(self, sort: SortBy) -> None:
        """Mark the sorted column in its heading (the rows are sorted by the model)."""
        self.sort_by = sort
        for index, name in enumerate(self.names):  # room for the mark before the rows come
            self.widths[index] = max(self.widths[index], len(heading(name, sort, index)))
        self._geometry()
        self.refresh()

    # --- painting ----------------------------------------------------------------------

    def _geometry(self) -> None:
        """Column widths changed: lines are built again, the virtual size follows."""
        self._lines.clear()
        self._header = None
        self.line_width = sum(w + 2 for w in self.widths)  # a space either side of a cell
        self.fixed_width = sum(w + 2 for w in self.widths[: self.fixed_columns])
        self.virtual_size = Size(self.line_width, len(self.model.rows) + 1)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._styles.clear()

    def _style(self, name: str) -> Style:
        """A part's style under its cells (`cursor…`: over them, as the stock table does)."""
        style = self._styles.get(name)
        if style is None:
            if name == "cursor":
                style = self.get_component_rich_style("pane-table--cursor")
            elif name == "fixed-cursor":
                style = self._style("cursor") + self.get_component_rich_style(
                    "pane-table--fixed-cursor"
                )
            elif name:
                style = self.get_component_styles(f"pane-table--{name}").rich_style
            else:
                style = self.rich_style
            self._styles[name] = style
        return style

    def _line(self, cells: Sequence[Text]) -> Strip:
        segments: list[Segment] = []
        for cell, width in zip(cells, self.widths, strict=False):
            segments.append(Segment(" "))
            segments += cell_segments(cell, width)
            segments.append(Segment(" "))
        return Strip(segments).adjust_cell_length(self.line_width)

    def _header_line(self) -> Strip:
        if self._header is None:
            segments: list[Segment] = []
            for index, width in enumerate(self.widths[: len(self.names)]):
                label = self.label(index)
                segments.append(Segment(" "))
                segments += cell_segments(label, width)
                segments.append(Segment(" "))
            self._header = Strip(segments).adjust_cell_length(self.line_width)
        return self._header

    def render_line(self, y: int) -> Strip:
        self.painted += 1
        width = self.scrollable_content_region.width
        cursor = False
        if y == 0:
            line, name = self._header_line(), "header"
        else:
            index = round(self.scroll_y) + y - 1
            if index >= len(self.model.rows):
                return Strip.blank(width, self._style(""))
            row = self.model.rows[index]
            cells = self._cells(index)
            kept = self._lines.get(row.key)
            if kept is not None and kept[0] is cells:
                line = kept[1]
            else:
                line = self._line(cells)
                self._lines[row.key] = (cells, line)
            name = "odd-row" if index % 2 else "even-row"
            cursor = index == self.cursor_row
        style = self._style(name)
        fixed = min(self.fixed_width, width)
        scroll_x = round(self.scroll_x)
        # the identifying columns stay; the rest scrolls sideways behind them
        left = line.crop(0, fixed).apply_style(style if y == 0 else self._style("fixed"))
        right = line.crop(fixed + scroll_x, fixed + scroll_x + width - fixed).apply_style(style)
        if cursor:  # the cursor's colours over the cells' own, as the stock table paints it
            left = over(left, self._style("fixed-cursor"))
            right = over(right, self._style("cursor"))
            style = style + self._style("cursor")
        return Strip.join([left, right]).extend_cell_length(width, style)
