"""`QuitScreen`: confirm ending the job while ranks are still alive."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import ModalScreen
from textual.widgets import Button, Label


class QuitScreen(ModalScreen[bool]):
    """Asks before ending live ranks; y/Enter confirms, n/Escape cancels."""

    BINDINGS = [
        Binding("y", "answer(True)", "Quit", show=False),
        Binding("n,escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, alive: int) -> None:
        super().__init__()
        self.alive = alive

    def compose(self) -> ComposeResult:
        """Question and two buttons."""
        with Grid(id="quit-dialog"):
            yield Label(f"{self.alive} rank(s) still running. End them all and quit? [y/n]", id="question")
            yield Button("Quit (y)", variant="error", id="quit")
            yield Button("Cancel (n)", variant="primary", id="cancel")

    def on_mount(self) -> None:
        """Focus Quit so Enter confirms."""
        self.query_one("#quit", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        """Answer by button."""
        self.dismiss(event.button.id == "quit")

    def action_answer(self, answer: bool) -> None:
        """Answer by key."""
        self.dismiss(answer)
