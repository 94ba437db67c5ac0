"""Every key of the console in one list.

HelpScreen([(key, description), ...])   a modal; Escape or ? closes (q quits, as everywhere)
"""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Footer, Static

from lockconsole.tui.bindings import ACTIONS, VIEW_KEYS


def help_rows(app: App[Any], *, read_only: bool) -> list[tuple[str, str]]:
    """(key, description) of every action the dashboard allows now, as the keymap binds it;
    in read-only mode the refused actions are not offered."""
    rows = []
    for a in ACTIONS:
        if a.mutates and read_only:
            continue
        key = app._keymap.get(a.id, a.key) if a.id else a.key
        rows.append((app.get_key_display(Binding(key, a.action)), a.help))
    return rows + list(VIEW_KEYS)


def keys_table(bindings: list[tuple[str, str]]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(no_wrap=True, justify="right")
    table.add_column(overflow="fold")
    for key, description in bindings:
        table.add_row(Text(key, style="bold"), Text(description))
    return table


class HelpScreen(ModalScreen[None]):
    """The keys (key, description) the current view offers."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > #dialog {
        width: 64; max-width: 100%; height: auto; max-height: 100%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    HelpScreen #title { text-style: bold; margin-bottom: 1; }
    HelpScreen #keys { height: auto; max-height: 100%; }
    """
    BINDINGS = [
        Binding("escape", "close", "Close", id="help_close"),
        Binding("question_mark", "close", "Close", show=False, id="help_close_question"),
        # a modal sees no app keys: q quits from here too, as on every screen
        Binding("q", "app.quit", "Quit", id="quit_from_modal"),
    ]

    def __init__(self, bindings: list[tuple[str, str]]) -> None:
        super().__init__()
        self.bindings_list = list(bindings)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static("Keys", id="title")
            with VerticalScroll(id="keys"):
                yield Static(keys_table(self.bindings_list), id="keys-table")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#keys", VerticalScroll).focus()

    def action_close(self) -> None:
        self.dismiss(None)
