"""The console's actions: one Binding each, with an id a user can rebind (Config.keymap),
shown in the footer or the help screen and offered in the command palette.

Most are the dashboard screen's own (Textual scopes them: another screen on top does not see
them); quitting is the app's, on every screen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from textual.binding import Binding, BindingType


@dataclass(frozen=True)
class ConsoleAction:
    id: str  # the binding id: the name a keymap uses ([keys] release = "k")
    key: str
    action: str  # the Textual action string
    label: str  # short, for the footer
    help: str  # one line, for the help screen and the palette
    words: str = ""  # more words the palette finds it by ("alert" finds the log)
    show: bool = True
    mutates: bool = False  # refused (and hidden) in --read-only mode
    scope: Literal["dashboard", "app"] = "dashboard"  # whose BINDINGS hold it

    @property
    def name(self) -> str:
        """The action method's name: without a namespace or parameters."""
        return self.action.split("(")[0].rsplit(".", 1)[-1]


ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction(
        "trigger",
        "t",
        "trigger",
        "Trigger",
        "Trigger a locked run of the selected job now (asks first)",
        "run start execute manual rerun now",
        mutates=True,
    ),
    ConsoleAction(
        "pause_job",
        "P",
        "pause_job",
        "Pause job",
        "Pause the selected job on every instance (asks for a note), or resume it",
        show=False,
        mutates=True,
    ),
    ConsoleAction(
        "release",
        "x",
        "release",
        "Release",
        "Force-release the selected lock holder (type its job name)",
        "kill terminate end unlock stale session expire delete",
        mutates=True,
    ),
    ConsoleAction(
        "describe",
        "i",
        "describe",
        "Describe",
        "Describe the selected holder, job or run: every field (Enter too)",
        "details info inspect show query client session fields",
    ),
    ConsoleAction(
        "duplicates",
        "d",
        "duplicates",
        "Dupes",
        "Inspect duplicate rows of the selected job's idempotency table",
        "duplicates idempotency double charge invoices csv export",
    ),
    ConsoleAction(
        "timeline",
        "s",
        "timeline",
        "Slots",
        "Show the selected job's slot timeline",
        "slots nights bars instances double run",
        show=False,
    ),
    ConsoleAction(
        "story",
        "w",
        "story",
        "Story",
        "Tell the story of the selected slot (a history row, else the job's newest): attempts, "
        "holders, audit, alerts, duplicate keys, verdict",
        "what happened incident postmortem account slot verdict double run holders journal",
        show=False,
    ),
    ConsoleAction(
        "alerts",
        "exclamation_mark",
        "alerts",
        "Alerts",
        "List the alerts; enter on one of a job's slot tells that slot's story",
        "alerts problems double run missed failed story",
        show=False,
    ),
    ConsoleAction(
        "travel",
        "b",
        "travel",
        "Time travel",
        "Set the dashboard's clock back to a moment: holders as the journal saw them, history "
        "as of then",
        "past history back then who held journal moment time travel",
        show=False,
    ),
    ConsoleAction(
        "now",
        "N",
        "now",
        "Back to now",
        "Back to now from the past: live data and the refresh again",
        "present live current time travel return",
    ),
    ConsoleAction(
        "filter",
        "slash",
        "filter",
        "Filter",
        "Filter holders and history by text (Esc clears)",
        "search find narrow text",
    ),
    ConsoleAction(
        "older",
        "m",
        "older",
        "Older runs",
        "Read a page of older runs into the history (for the filter's job:, instance:, outcome:)",
        "more page back earlier history paging scroll past",
        show=False,
    ),
    ConsoleAction(
        "audit",
        "a",
        "audit",
        "Audit",
        "Show the audit log: every force-release and trigger, who, when, the result",
        "audit who did what force release trigger history actor",
        show=False,
    ),
    ConsoleAction(
        "group",
        "g",
        "group",
        "Group",
        "Group lock holders by job or by session",
        "session job by pid",
    ),
    ConsoleAction(
        "maximise",
        "z",
        "maximise",
        "Zoom",
        "Maximise the focused pane, or give the others back their room",
        "maximize zoom full screen bigger enlarge pane",
    ),
    ConsoleAction(
        "sort",
        "S",
        "sort_column",
        "Sort",
        "Sort the focused pane by the column chosen with < >; again: reversed; a third "
        "time: the natural order",
        "order column arrange reverse ascending descending",
        show=False,
    ),
    ConsoleAction(
        "sort_next",
        "greater_than_sign",
        "choose_column(1)",
        "Column right",
        "Choose the next column of the focused pane to sort by (its heading in reverse)",
        "order sort column arrange right",
        show=False,
    ),
    ConsoleAction(
        "sort_previous",
        "less_than_sign",
        "choose_column(-1)",
        "Column left",
        "Choose the previous column of the focused pane to sort by",
        "order sort column arrange left",
        show=False,
    ),
    ConsoleAction(
        "pause", "p", "pause", "Pause", "Pause or resume the automatic refresh", "freeze stop"
    ),
    ConsoleAction("refresh", "r", "refresh", "Refresh", "Refresh now", "reload update", show=False),
    ConsoleAction(
        "log",
        "o",
        "toggle_log",
        "Log",
        "Show or hide the log: job output, alerts, releases",
        "alerts output messages events audit",
        show=False,
    ),
    ConsoleAction(
        "focus_jobs",
        "1",
        "focus_pane('jobs')",
        "Jobs",
        "Go to the jobs pane",
        "schedule next firing",
        show=False,
    ),
    ConsoleAction(
        "focus_holders",
        "2",
        "focus_pane('holders')",
        "Holders",
        "Go to the lock holders pane",
        "locks sessions waiting",
        show=False,
    ),
    ConsoleAction(
        "focus_history",
        "3",
        "focus_pane('history')",
        "History",
        "Go to the run history pane",
        "runs ledger attempts outcomes",
        show=False,
    ),
    # the app shows the help (it knows every binding), from the dashboard only
    ConsoleAction("help", "question_mark", "app.help", "Help", "Show every key", "keys bindings"),
    ConsoleAction("quit", "q", "quit", "Quit", "Quit the console", "exit leave close", scope="app"),
)
MUTATING = frozenset(a.name for a in ACTIONS if a.mutates)


def _bindings(scope: str) -> list[BindingType]:
    return [
        Binding(a.key, a.action, a.label, show=a.show, id=a.id) for a in ACTIONS if a.scope == scope
    ]


def dashboard_bindings() -> list[BindingType]:
    """The dashboard screen's keys: help and quit first, so a narrow footer still shows them
    (the footer lists the screen's keys before the app's, and cuts off at the right)."""
    first = ("help", "quit")
    lead = [
        Binding(a.key, "app." + a.action.removeprefix("app."), a.label, id=a.id)
        for name in first
        for a in ACTIONS
        if a.id == name
    ]
    rest = [b for b in _bindings("dashboard") if not (isinstance(b, Binding) and b.id in first)]
    return [
        *lead,
        *rest,
        Binding("escape", "close_filter", "Clear filter", show=False, id="close_filter"),
    ]


def app_bindings() -> list[BindingType]:
    """The keys of every screen."""
    return [
        *_bindings("app"),
        # Ctrl-C quits too (Textual only hints at ctrl+q): the demo stops its fleet on exit
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="interrupt"),
    ]


VIEW_KEYS: tuple[tuple[str, str], ...] = (
    ("tab / shift+tab", "Next / previous pane"),
    ("↑ ↓ pgup pgdn", "Move the cursor in a pane"),
    ("home / end, G", "Cursor to the first / last row (G: the last)"),
    ("← →", "Scroll sideways (the identifying columns stay)"),
    ("enter", "Describe the selected holder, job or run"),
    ("esc", "Close a screen (on the dashboard: clear the filter)"),
    ("ctrl+p", "Command palette: every action by its words"),
)
