"""How the dashboard's three panes share the height (pure: no Textual).

    share(total, rows, maximised=None) -> {pane: height}

A pane wants its rows plus two lines (its title border and its column headings); an empty pane
collapses to its title line. When everything fits, each pane gets what it wants and the room
left goes to the first pane with rows among holders, history, jobs. When it does not fit, the
jobs pane gets at most a third, the history at most a third of the rest, and the lock holders
pane the rest; whatever a pane does not need goes to the others. A maximised pane gets all but
the others' title lines.
"""

from __future__ import annotations

from collections.abc import Mapping

PANES = ("jobs", "holders", "history")
CHROME = 2  # the title border and the column headings
SMALLEST = 3  # a pane with rows shows at least one of them


def wanted(rows: int) -> int:
    return rows + CHROME if rows else 1


def share(total: int, rows: Mapping[str, int], maximised: str | None = None) -> dict[str, int]:
    """Heights of the panes (summing to `total` when it is at least one line each)."""
    want = {p: wanted(rows.get(p, 0)) for p in PANES}
    if maximised in PANES:
        heights = dict.fromkeys(PANES, 1)
        heights[maximised] = max(1, total - (len(PANES) - 1))
        return heights
    if sum(want.values()) <= total:
        heights = dict(want)
        spare = total - sum(heights.values())
        first = next((p for p in ("holders", "history", "jobs") if rows.get(p)), "holders")
        heights[first] += spare
        return heights
    heights = dict.fromkeys(PANES, 1)
    left = max(0, total - len(PANES))

    def grow(pane: str, most: int) -> None:
        nonlocal left
        give = max(0, min(want[pane] - heights[pane], most, left))
        heights[pane] += give
        left -= give

    if rows.get("jobs"):
        grow("jobs", max(SMALLEST, total // 3) - 1)
    if rows.get("history"):
        grow("history", max(SMALLEST, (total - heights["jobs"]) // 3) - 1)
    for pane in ("holders", "history", "jobs"):  # then whatever each still wants
        grow(pane, left)
    heights["holders"] += left
    return heights
