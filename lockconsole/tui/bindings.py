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
        mutates=True,
    ),
    ConsoleAction(
        "duplicates",
        "d",
        "duplicates",
        "Dupes",
        "Inspect duplicate rows of the selected job's idempotency table",
    ),
    ConsoleAction(
        "run_detail",
        "i",
        "run_detail",
        "Run",
        "Show the selected run with the other attempts of its slot",
        show=False,
    ),
    ConsoleAction(
        "timeline", "s", "timeline", "Slots", "Show the selected job's slot timeline", show=False
    ),
    ConsoleAction(
        "filter", "slash", "filter", "Filter", "Filter holders and history by text (Esc clears)"
    ),
    ConsoleAction("group", "g", "group", "Group", "Group lock holders by job or by session"),
    ConsoleAction("pause", "p", "pause", "Pause", "Pause or resume the automatic refresh"),
    ConsoleAction("refresh", "r", "refresh", "Refresh", "Refresh now", show=False),
    ConsoleAction("log", "o", "toggle_log", "Log", "Show or hide the output log", show=False),
    ConsoleAction(
        "focus_jobs", "1", "focus_pane('jobs')", "Jobs", "Go to the jobs pane", show=False
    ),
    ConsoleAction(
        "focus_holders",
        "2",
        "focus_pane('holders')",
        "Holders",
        "Go to the lock holders pane",
        show=False,
    ),
    ConsoleAction(
        "focus_history",
        "3",
        "focus_pane('history')",
        "History",
        "Go to the run history pane",
        show=False,
    ),
    # the app shows the help (it knows every binding), from the dashboard only
    ConsoleAction("help", "question_mark", "app.help", "Help", "Show every key"),
    ConsoleAction("quit", "q", "quit", "Quit", "Quit the console", scope="app"),
)
MUTATING = frozenset(a.name for a in ACTIONS if a.mutates)


def _bindings(scope: str) -> list[BindingType]:
    return [
        Binding(a.key, a.action, a.label, show=a.show, id=a.id) for a in ACTIONS if a.scope == scope
    ]


def dashboard_bindings() -> list[BindingType]:
    """The dashboard screen's keys."""
    return [
        *_bindings("dashboard"),
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
    ("↑ ↓ pgup pgdn home end", "Move the cursor in a pane"),
    ("enter", "Open the selected run (history)"),
    ("ctrl+p", "Command palette: every action by name"),
)
