"""What a run left: its output tail (or traceback), loaded in a thread when shown.

RunOutputView(load, run_id)   a heading and the text, as data: passwords masked, controls
                              escaped, lines kept; "no output kept" when the run left none
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from lockconsole.text.safe import printable_lines, shown

if TYPE_CHECKING:
    from lockconsole.backends.ledger.outputs import RunOutput


class RunOutputView(Vertical):
    """The kept output of one run, read from the ledger in a thread worker."""

    DEFAULT_CSS = """
    RunOutputView { height: auto; }
    RunOutputView #output-heading { text-style: bold; margin-top: 1; }
    RunOutputView #output { height: auto; }
    """

    def __init__(self, load: Callable[[int], RunOutput | None], run_id: int) -> None:
        super().__init__()
        self.load = load
        self.run_id = run_id

    def compose(self) -> ComposeResult:
        yield Static("Output (last 64 KB)", id="output-heading", markup=False)
        yield Static(Text("loading…", style="dim"), id="output")

    def on_mount(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="run_output", exit_on_error=False)
    def _load(self) -> None:
        try:
            found = self.load(self.run_id)
        except Exception as exc:
            text = Text(shown(f"cannot read the output: {exc}"), style="red")
        else:
            if found is None or not found.output:
                text = Text("no output kept", style="dim")
            else:
                text = Text(printable_lines(shown_lines(found.output)))
        self.app.call_from_thread(self.query_one("#output", Static).update, text)


def shown_lines(text: str) -> str:
    """Every line as shown() makes it (passwords masked), the line breaks kept."""
    return "\n".join(shown(line) for line in text.split("\n"))
