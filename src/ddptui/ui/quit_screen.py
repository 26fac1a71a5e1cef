"""`QuitScreen`: confirm ending the job while ranks are still alive."""

from __future__ import annotations

from collections import Counter

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.screen import ModalScreen
from textual.widgets import Button, Label

from ddptui.core.model.state import RankState
from ddptui.ui.rank_bar import has_crashed

ORDER = ("paused", "crashed", "waiting", "running", "starting", "exited")
"""The order the question lists live ranks in: the ones the user is looking at first."""


def kind(state: RankState) -> str:
    """What a live rank is doing, in one word: a crashed rank in post-mortem is `crashed`."""
    if has_crashed(state):
        return "crashed"
    return str(state.phase.value)


def question(states: tuple[RankState, ...], leave: bool = False) -> str:
    """`End 2 paused, 1 crashed, 1 running rank(s) and quit?`; with `leave` (ranks on other nodes,
    `ddptui listen --on-disconnect continue`) `Detach from ... rank(s) (they run on undebugged) and quit?`."""
    counts = Counter(kind(state) for state in states)
    words = ", ".join(f"{counts[name]} {name}" for name in ORDER if counts[name])
    return (
        f"Leave {words} rank(s) running undebugged and quit?" if leave else f"End {words} rank(s) and quit?"
    )


class QuitScreen(ModalScreen[bool]):
    """Asks before ending live ranks, saying what they are doing; y/Enter confirms, n/Escape cancels."""

    BINDINGS = [
        Binding("y", "answer(True)", "Quit", show=False),
        Binding("n,escape", "answer(False)", "Cancel", show=False),
    ]

    def __init__(self, states: tuple[RankState, ...], leave: bool = False) -> None:
        """Ask about ending (or, with `leave`, leaving) the live ranks whose states are `states`."""
        super().__init__()
        self.states = states
        self.leave = leave

    def compose(self) -> ComposeResult:
        """Question and two buttons."""
        with Grid(id="quit-dialog"):
            yield Label(f"{question(self.states, self.leave)} [y/n]", id="question", markup=False)
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
