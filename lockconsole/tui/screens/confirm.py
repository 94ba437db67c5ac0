"""Confirmation modals: a yes/no question, and the force-release of one lock holder.

ConfirmModal(title, body)  -> bool   y / Enter confirm; n / Escape cancel
ReleaseModal(holder, blocks, zone, consequences)
                           -> bool   shows what will be ended and what that causes (who
                                     gets the lock next, the session's other locks freed
                                     with it; times in the console's zone);
                                     typing the job name (or the
                                     key, for an unmapped holder) enables Release; a waiter
                                     cannot be released, so it only offers Cancel
InputModal                 the shape of a one-field question (the pause's note, the moment to
                           travel to): Enter or the first button submits, Escape cancels
QuitRunModal(job)          -> str    quitting with a triggered run going: "stop" (s) it and
                                     quit, "wait" (w, or q: asking to quit again never stops
                                     a run) for it and quit, or "cancel" (Escape)

A modal sees no app keys, so each binds q to quit. Where the modal has a text field (the job
name a release asks for), q is text while the field has the focus (a job name may hold a q):
Tab to the buttons, then q quits; ctrl+c quits from anywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import tzinfo
from typing import TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from lockconsole.model.views import Holder
from lockconsole.text.safe import data_text, shown
from lockconsole.tui.widgets.holders.facts import (
    holder_details,
    holder_label,
    release_target,
)

DIALOG_CSS = """
    align: center middle;
    & > #dialog {
        width: 78; max-width: 100%; height: auto; max-height: 100%;
        padding: 0 1; background: $surface; border: thick $primary;
    }
    & #title { text-style: bold; width: 1fr; margin-bottom: 1; }
    & #buttons { height: auto; align-horizontal: right; margin-top: 1; }
    & #buttons Button { margin-left: 2; }
    & #body-scroll { height: auto; max-height: 16; }
"""

_Answer = TypeVar("_Answer")


class InputModal(ModalScreen[_Answer | None]):
    """A question with one text field: a title, a paragraph, the field, then Go and Cancel.
    Each subclass sets its CSS and bindings (their ids are the keymap's), says what it asks
    (`question`) and reads the text (`submitted`: dismiss with the answer, or notify why not)."""

    def question(self) -> tuple[str, str, Input, str]:
        """The title, the paragraph, the field (with its id) and the Go button's label."""
        raise NotImplementedError

    def submitted(self, text: str) -> None:
        raise NotImplementedError

    def compose(self) -> ComposeResult:
        title, body, field, go = self.question()
        with Vertical(id="dialog"):
            yield Static(title, id="title", markup=False)
            yield Static(body, id="body", markup=False)
            yield field
            with Horizontal(id="buttons"):
                yield Button(go, id="confirm", variant="warning", compact=True)
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submitted(event.value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm":
            self.submitted(self.query_one(Input).value)
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class ConfirmModal(ModalScreen[bool]):
    """A yes/no question before an action such as a trigger."""

    DEFAULT_CSS = "ConfirmModal {" + DIALOG_CSS + "}"
    BINDINGS = [
        Binding("y", "confirm", "Yes", id="confirm_yes"),
        Binding("n", "cancel", "No", id="confirm_no"),
        Binding("escape", "cancel", "Cancel", id="confirm_cancel"),
        # a modal sees no app keys: q quits from here too, as on every screen
        Binding("q", "app.quit", "Quit", id="quit_from_modal"),
    ]

    def __init__(self, title: str, body: str | Sequence[str]) -> None:
        """`body`: one paragraph, or several; each is shown literally (a newline inside one,
        from data, shows as an escape), and the paragraphs are set apart by a blank line."""
        super().__init__()
        self.title_text = title
        self.body = "\n\n".join(shown(p) for p in ([body] if isinstance(body, str) else body))

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(shown(self.title_text), id="title", markup=False)
            with VerticalScroll(id="body-scroll"):
                yield Static(self.body, id="body", markup=False)
            with Horizontal(id="buttons"):
                yield Button("Yes (y)", id="confirm", variant="primary", compact=True)
                yield Button("No (n)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#confirm", Button).focus()  # Enter presses it

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm")

    def action_confirm(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ReleaseModal(ModalScreen[bool]):
    """Force-release one holder, after typing its job name (or key) to prove intent."""

    DEFAULT_CSS = (
        "ReleaseModal {"
        + DIALOG_CSS
        + """
        & > #dialog { border: thick $error; }
        & #details { height: auto; max-height: 13; }
        /* the header and the status line (rows 0, 1) stay visible however long the holder's
           data: a short terminal gets fewer detail rows (they scroll), so the centred dialog
           fits below them */
        &.-short #details { max-height: 7; }
        & #prompt { margin-top: 1; }
        & #waiter { color: $warning; margin-top: 1; }
        & #consequences { color: $warning; margin-bottom: 1; }
        & Input.-wrong { border: tall $error; }
    }"""
    )
    BINDINGS = [
        Binding("escape", "cancel", "Cancel", id="release_cancel"),
        Binding("q", "app.quit", "Quit", show=False, id="quit_from_release"),
    ]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(
        self,
        holder: Holder,
        blocks: tuple[int, ...] = (),
        zone: tzinfo | None = None,
        consequences: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.holder = holder
        self.blocks = blocks
        self.zone = zone
        self.consequences = tuple(consequences)  # who gets the lock, what else is freed
        self.expected = holder_label(holder)

    def compose(self) -> ComposeResult:
        h = self.holder
        with Vertical(id="dialog"):
            title = release_target(h) + "?" if h.granted else "A waiter cannot be released"
            yield Static(shown(title), id="title", markup=False)
            if self.consequences:  # above the details: a short terminal shows them first
                text = "\n".join(map(shown, self.consequences))
                yield Static(text, id="consequences", markup=False)
            with VerticalScroll(id="details"):
                yield Static(holder_details(h, self.blocks, self.zone))
            if h.granted:
                what = "job name" if h.job else "key"
                yield Static(
                    Text.assemble(
                        f"Type the {what} ", data_text(self.expected, "bold"), " to confirm:"
                    ),
                    id="prompt",
                )
                yield Input(placeholder=shown(self.expected), id="confirm-text")
            else:
                blockers = ", ".join(str(p) for p in h.blocked_by) or "the holder"
                yield Static(
                    f"This session waits for the lock; it holds nothing to release. "
                    f"Release the session it waits for ({blockers}) instead.",
                    id="waiter",
                    markup=False,
                )
            with Horizontal(id="buttons"):
                if h.granted:
                    yield Button(
                        "Release", id="release", variant="error", disabled=True, compact=True
                    )
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        if self.holder.granted:
            self.query_one(Input).focus()
        else:
            self.query_one("#cancel", Button).focus()

    def _matches(self, value: str) -> bool:
        # a key with control characters is typed as it is shown (its escapes)
        typed = value.strip()
        return self.holder.granted and typed in (self.expected, shown(self.expected))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.input.remove_class("-wrong")
        self.query_one("#release", Button).disabled = not self._matches(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._matches(event.value):
            self.dismiss(True)
        else:
            event.input.add_class("-wrong")
            self.notify(
                f"Type {shown(self.expected)} exactly to release", severity="warning", markup=False
            )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "release" and self._matches(self.query_one(Input).value):
            self.dismiss(True)
        elif event.button.id == "cancel":
            self.dismiss(False)

    def action_cancel(self) -> None:
        self.dismiss(False)


class QuitRunModal(ModalScreen[str]):
    """Quit while a triggered run is going: stop it (then quit), wait for it, or stay."""

    DEFAULT_CSS = "QuitRunModal {" + DIALOG_CSS + "}"
    BINDINGS = [
        Binding("s", "choose('stop')", "Stop the run", id="quit_stop"),
        Binding("w", "choose('wait')", "Wait for it", id="quit_wait"),
        Binding("escape", "choose('cancel')", "Cancel", id="quit_cancel"),
        # q again: quit, as asked, but never by stopping a run unasked: wait for it
        Binding("q", "choose('wait')", "Wait for it", show=False, id="quit_again"),
    ]

    def __init__(self, job: str) -> None:
        super().__init__()
        self.job = job

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(f"{self.job} is still running", id="title", markup=False)
            yield Static(
                "Quitting now would leave it without the console that started it. Stop it "
                "(SIGTERM, then SIGKILL after its stop_grace; the outcome is recorded) and "
                "quit, or wait for it to end and quit then.",
                id="body",
                markup=False,
            )
            with Horizontal(id="buttons"):
                yield Button("Stop the run (s)", id="stop", variant="error", compact=True)
                yield Button("Wait for it (w)", id="wait", variant="primary", compact=True)
                yield Button("Cancel (Esc)", id="cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#wait", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id or "cancel")

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)
