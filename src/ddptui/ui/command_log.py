"""`CommandLog`: what `:` commands and broadcasts said, as plain text under the panes."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import RichLog

from ddptui.core.commands import Result
from ddptui.core.text import inert


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
        super().__init__(max_lines=2000, wrap=False, markup=False, highlight=False, id="command-log")
        self.can_focus = False

    def echo(self, line: str) -> None:
        """Show what the user typed."""
        self.write(Text(f"(ddptui) {inert(line)}", style="bold"))

    def show(self, result: Result) -> None:
        """Show a command's result; errors in the error colour."""
        style = "red" if result.error else ""
        for line in result.lines:
            self.write(Text(inert(line), style=style))

    def lines_text(self) -> list[str]:
        """The plain text of every line shown (for tests and copy-out)."""
        return [strip.text for strip in self.lines]
