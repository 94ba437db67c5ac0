"""The dashboard's three panes laid out from one snapshot, in the refresh worker (no Textual).

    view = PaneView(...)                      # taken on the UI thread when a refresh starts
    panes = build_panes(snapshot, view, now, older=runs, previous=panes_on_screen)

The holders' rows (`holders.rows.layout`), the jobs' and the history's table models
(`table_model.table_model`: sorted, every cell made safe, columns measured) and the run behind
each history row. The UI thread only swaps them in (`DashboardScreen.show_data`); when the
filter, a sort or the grouping changed while the worker ran (`view` is no longer the screen's),
or older runs came in, the screen lays out again itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, tzinfo

from lockconsole.model.jobs import Run
from lockconsole.model.views import Snapshot
from lockconsole.tui import nocolor
from lockconsole.tui.pane_rows import (
    HISTORY_COLUMNS,
    JOB_COLUMNS,
    Staleness,
    history_rows,
    job_rows,
)
from lockconsole.tui.widgets.holders.rows import GroupBy, HolderRows, layout
from lockconsole.tui.widgets.holders.rows import SortBy as HolderSort
from lockconsole.tui.widgets.table_model import SortBy, TableModel, table_model
from lockconsole.tui.widgets.tables import today_in


@dataclass(frozen=True)
class PaneView:
    """What the panes' rows depend on besides the snapshot and the clock."""

    group_by: GroupBy = "job"
    text_filter: str = ""
    holder_sort: HolderSort = None
    jobs_sort: SortBy = None
    history_sort: SortBy = None
    zone: tzinfo | None = None
    configured: frozenset[str] | None = None  # the configured jobs (others are marked)
    monochrome: bool = False  # NO_COLOR: cells without colour
    stale: Staleness = field(default_factory=Staleness, compare=False)  # databases down


@dataclass(frozen=True)
class Panes:
    view: PaneView
    holders: HolderRows
    jobs: TableModel
    history: TableModel
    runs_of: Mapping[str, tuple[Run, list[Run]]]  # history row key -> its run and its slot's
    older: int = 0  # older runs ("m") laid out


def build_panes(
    snapshot: Snapshot,
    view: PaneView,
    now: datetime,
    *,
    older: Sequence[Run] = (),
    previous: Panes | None = None,
) -> Panes:
    """Every pane's rows for `snapshot` at `now`; cells already clean in `previous` are kept."""
    paint = nocolor.without_colour if view.monochrome else None
    today = today_in(now, view.zone)
    holders = layout(snapshot.holders, view.group_by, view.text_filter, view.holder_sort, view.zone)
    jobs = job_rows(
        snapshot, now, zone=view.zone, stale=view.stale, text_filter=view.text_filter
    )  # fmt: skip
    history, runs_of = history_rows(
        snapshot,
        now,
        view.text_filter,
        zone=view.zone,
        configured=view.configured,
        older=older,
    )
    return Panes(
        view=view,
        holders=holders,
        jobs=table_model(
            jobs,
            JOB_COLUMNS,
            sort=view.jobs_sort,
            today=today,
            previous=previous.jobs if previous is not None else None,
            paint=paint,
        ),
        history=table_model(
            history,
            HISTORY_COLUMNS,
            sort=view.history_sort,
            today=today,
            previous=previous.history if previous is not None else None,
            paint=paint,
        ),
        runs_of=runs_of,
        older=len(older),
    )
