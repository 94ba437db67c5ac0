"""The console's actions: one Binding each, with an id a user can rebind (Config.keymap),
shown in the footer or the help screen and offered in the command palette."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding


@dataclass(frozen=True)
class ConsoleAction:
    id: str  # the binding id: the name a keymap uses ([keys] release = "k")
    key: str
    action: str  # the Textual action string
    label: str  # short, for the footer
    help: str  # one line, for the help screen and the palette
    show: bool = True
    mutates: bool = False  # refused (and hidden) in --read-only mode


ACTIONS: tuple[ConsoleAction, ...] = (
    ConsoleAction("trigger", "t", "trigger", "Trigger",
                  "Trigger a locked run of the selected job now (asks first)", mutates=True),
    ConsoleAction("release", "x", "release", "Release",
                  "Force-release the selected lock holder (type its job name)", mutates=True),
    ConsoleAction("duplicates", "d", "duplicates", "Dupes",
                  "Inspect duplicate rows of the selected job's idempotency table"),
    ConsoleAction("run_detail", "i", "run_detail", "Run",
                  "Show the selected run with the other attempts of its slot", show=False),
    ConsoleAction("timeline", "s", "timeline", "Slots",
                  "Show the selected job's slot timeline", show=False),
    ConsoleAction("filter", "slash", "filter", "Filter",
                  "Filter holders and history by text (Esc clears)"),
    ConsoleAction("group", "g", "group", "Group",
                  "Group lock holders by job or by session"),
    ConsoleAction("pause", "p", "pause", "Pause", "Pause or resume the automatic refresh"),
    ConsoleAction("refresh", "r", "refresh", "Refresh", "Refresh now", show=False),
    ConsoleAction("log", "o", "toggle_log", "Log", "Show or hide the output log", show=False),
    ConsoleAction("focus_jobs", "1", "focus_pane('jobs')", "Jobs", "Go to the jobs pane",
                  show=False),
    ConsoleAction("focus_holders", "2", "focus_pane('holders')", "Holders",
                  "Go to the lock holders pane", show=False),
    ConsoleAction("focus_history", "3", "focus_pane('history')", "History",
                  "Go to the run history pane", show=False),
    ConsoleAction("help", "question_mark", "help", "Help", "Show every key"),
    ConsoleAction("quit", "q", "quit", "Quit", "Quit the console"),
)  # fmt: skip
MUTATING = frozenset(a.action for a in ACTIONS if a.mutates)
# the dashboard's own actions: off while another screen (a modal, duplicates, ...) is on top
DASHBOARD = frozenset(a.action.split("(")[0] for a in ACTIONS if a.id != "quit") | {"close_filter"}


def app_bindings() -> list[Binding]:
    keys = [Binding(a.key, a.action, a.label, show=a.show, id=a.id) for a in ACTIONS]
    return [
        *keys,
        Binding("escape", "close_filter", "Clear filter", show=False, id="close_filter"),
        # Ctrl-C quits too (Textual only hints at ctrl+q): the demo stops its fleet on exit
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True, id="interrupt"),
    ]


VIEW_KEYS: tuple[tuple[str, str], ...] = (
    ("tab / shift+tab", "Next / previous pane"),
    ("↑ ↓ pgup pgdn home end", "Move the cursor in a pane"),
    ("enter", "Open the selected run (history)"),
    ("ctrl+p", "Command palette: every action by name"),
)
