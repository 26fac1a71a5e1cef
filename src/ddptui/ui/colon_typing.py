"""`ColonTyping`: a `:` typed in a pane at its rank's pdb prompt moves typing to the command line.

pdb takes no line that starts with `:`, so there it starts a ddptui command instead; once that
line is entered, typing goes back to the pane it came from.
"""

from __future__ import annotations

from collections.abc import Callable

from ddptui.ui.command_bar import CommandBar

FreshPrompt = Callable[[int], bool]
"""Whether a rank stands at its pdb prompt with nothing typed since it was shown."""
SendInput = Callable[[int, bytes], None]
"""Type bytes into a rank."""


class ColonTyping:
    """Where keys typed in a pane go: to its rank, or to the command line after a `:`."""

    def __init__(self, bar: CommandBar, fresh_prompt: FreshPrompt, send: SendInput) -> None:
        """Keys go to ranks through `send`, or to `bar`'s input when `fresh_prompt` says a `:` may."""
        self._bar = bar
        self._fresh_prompt = fresh_prompt
        self._send = send
        self.typed_from: int | None = None
        """The pane whose `:` opened the command line: it gets the keys back after that line."""

    def pane_input(self, index: int, data: bytes) -> None:
        """Keys typed in a pane go to that rank alone.

        But `:` as the first key at the rank's pdb prompt starts a ddptui command on the command
        line (pdb takes no line that starts with `:`); once it is entered, typing comes back here.
        """
        if self.typed_from == index:  # typed (or pasted) before the command line had the keys
            self.type_on_command_line(data)
            return
        if data[:1] == b":" and self._fresh_prompt(index):
            self.typed_from = index
            self._bar.begin("")
            self.type_on_command_line(data)
            return
        self._send(index, data)

    def type_on_command_line(self, data: bytes) -> None:
        """Keys that went to a pane after its `:` moved typing to the command line: Enter runs
        the line, Backspace and printable characters edit it, other keys are dropped."""
        line = self._bar.input
        for char in data.decode("utf-8", "replace"):
            if char in "\r\n":
                line.call_later(line.action_submit)
                return
            if char in "\x7f\b":
                line.action_delete_left()
            elif char.isprintable():
                line.insert_text_at_cursor(char)
