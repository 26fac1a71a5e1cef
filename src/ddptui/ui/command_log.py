"""`CommandLog`: what `:` commands and broadcasts said, as plain text under the panes."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.widgets import RichLog

from ddptui.core.commands.registry import Result
from ddptui.core.model.text import inert


class CommandLog(RichLog):
    """A short scrolling log of command results; never interprets what it shows as markup."""

    DEFAULT_CSS = """
    CommandLog {
        height: 5;
        padding: 0 1;
        background: $panel;
        scrollbar-size-vertical: 1;
    }
    """

    def __init__(self) -> None:
        super().__init__(
            max_lines=2000, min_width=20, wrap=True, markup=False, highlight=False, id="command-log"
        )  # min_width: RichLog wraps at 78 columns at least, wider than a small terminal
        self.can_focus = False
        self._said: deque[str] = deque(maxlen=2000)
        """Every line written, unwrapped, as many as the log keeps."""

    def echo(self, line: str) -> None:
        """Show what the user typed."""
        self._said.append(f"(ddptui) {inert(line)}")
        self.write(Text(self._said[-1], style="bold"))

    def show(self, result: Result) -> None:
        """Show a command's result; errors in the error colour.

        A line wider than the log wraps (a note's end says why: the crash behind a hang), except
        in a table or a stack tree, whose columns and indents say as much: those are cut, `…`.
        """
        style = "red" if result.error else ""
        laid_out = bool(result.tables or result.stack)
        for line in result.lines:
            self._said.append(inert(line))
            self.write(
                Text(
                    self._said[-1], style=style, no_wrap=laid_out, overflow="ellipsis" if laid_out else "fold"
                )
            )

    def lines_text(self) -> list[str]:
        """The plain text of every line shown, unwrapped (for tests and copy-out)."""
        return list(self._said)
