"""`CommandBar`: the line at the bottom that broadcasts pdb commands, with a mode indicator."""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive, reactive
from textual.widgets import Input, Label

BROADCAST_HINT = "pdb command for every target rank (n, s, c, p expr, @0,2 cmd, :ranks 0-1)"
"""The command line's placeholder while it has the keys."""


class CommandInput(Input):
    """An Input with a history on up/down, like a shell."""

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)
    """As Widget's, but without a layout: Input grows it on every keystroke, and a layout of the
    whole screen (8 terminal panes) on every key made typing lag during a log flood."""

    def __init__(self, **kwargs: object) -> None:
        kwargs.setdefault("select_on_focus", False)  # a `:` put there from a pane must stay
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: list[str] = []
        self._back = 0

    def remember(self, line: str) -> None:
        """Add a submitted line to the history."""
        if line and (not self.history or self.history[-1] != line):
            self.history.append(line)
        self._back = 0

    def on_key(self, event: events.Key) -> None:
        """Up/down walk the history."""
        if event.key not in ("up", "down") or not self.history:
            return
        event.stop()
        event.prevent_default()
        self._back = max(0, min(len(self.history), self._back + (1 if event.key == "up" else -1)))
        self.value = self.history[-self._back] if self._back else ""
        self.cursor_position = len(self.value)


class CommandBar(Horizontal):
    """Mode indicator + command line. Enter submits a `CommandBar.Submitted`."""

    target: reactive[str] = reactive("all")
    """The ranks a broadcast goes to, in words."""
    broadcast: reactive[bool] = reactive(False)
    """True when typing goes to the command line; False when it goes to the focused pane."""
    focused_rank: reactive[int] = reactive(0)
    """The pane keystrokes go to when not broadcasting."""
    progress: reactive[str] = reactive("")
    """How a long command gets on (`:until EXPR … stop 17…`), shown after the input; empty: none runs."""

    @dataclass
    class Submitted(Message):
        """A line entered on the command line."""

        bar: CommandBar
        line: str

        @property
        def control(self) -> CommandBar:
            """The bar the line came from."""
            return self.bar

    def compose(self) -> ComposeResult:
        """The indicator, the input, then a long command's progress."""
        yield Label(id="mode")
        yield CommandInput()
        yield Label(id="progress")

    def on_mount(self) -> None:
        """Draw the indicator once."""
        self._show_mode()

    def watch_target(self) -> None:
        """Redraw the indicator."""
        self._show_mode()

    def watch_broadcast(self) -> None:
        """Redraw the indicator and the mode class."""
        self._show_mode()

    def watch_focused_rank(self) -> None:
        """Redraw the indicator."""
        self._show_mode()

    def watch_progress(self) -> None:
        """Show a long command's progress (plain text: an expression is never markup), or hide it."""
        try:
            label = self.query_one("#progress", Label)
        except NoMatches:
            return
        label.update(Text(self.progress))
        self.set_class(bool(self.progress), "-progress")

    def _show_mode(self) -> None:
        """`BROADCAST → all` or `TYPING → rank 2`."""
        try:
            label = self.query_one("#mode", Label)
        except NoMatches:
            return
        if self.broadcast:
            label.update(f" BROADCAST → {self.target} ")
            self.input.placeholder = BROADCAST_HINT
        else:
            label.update(f" TYPING → rank {self.focused_rank} ")
            self.input.placeholder = f"F2: type here to broadcast to {self.target} · or :cmd in a pane"
        self.set_class(self.broadcast, "-broadcast")
        self.set_class(not self.broadcast, "-typing")

    @property
    def input(self) -> CommandInput:
        """The input widget."""
        return self.query_one(CommandInput)

    def begin(self, text: str) -> None:
        """Put `text` on the command line, the cursor after it, and give it the keys: a line
        begun for the user to finish (`:until ` from the palette, `:` from a pane)."""
        line = self.input
        line.value, line.cursor_position = text, len(text)
        line.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Forward the line, clear the input."""
        event.stop()
        line = event.value
        self.input.remember(line.strip())
        self.input.value = ""
        self.post_message(self.Submitted(self, line))
