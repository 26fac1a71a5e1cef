"""`TypingFocus`: where typing goes, the focused rank's pane or the command line (a broadcast), as
the command bar says (`TYPING → rank 2`, `BROADCAST → all`); it follows the focus and moves it.
"""

from __future__ import annotations

from textual.widget import Widget

from ddptui.ui.colon_typing import ColonTyping
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.pane_grid import PaneGrid
from ddptui.ui.rank_pane import RankPane


class TypingFocus:
    """The rank typing goes to, or the command line; kept in step with the focus and the bar."""

    def __init__(self, bar: CommandBar, panes: PaneGrid, typing: ColonTyping) -> None:
        """Follows the focus between `panes` and `bar`'s input; a pane focused ends `typing`'s `:` line."""
        self._bar = bar
        self._panes = panes
        self._typing = typing
        self.rank = 0
        """The rank whose pane has the keys, or had them last while the command line has them."""
        self.broadcasting = False
        """True while the command line has the keys: what is typed is broadcast."""

    def follow(self, focused: Widget) -> None:
        """A widget got the focus: a pane means typing goes to its rank, the command line a broadcast."""
        bar = self._bar
        if isinstance(focused, RankPane):
            self.rank, self.broadcasting = focused.rank, False
            self._typing.typed_from = None
        elif focused is bar.input:
            self.broadcasting = True
        bar.broadcast, bar.focused_rank = self.broadcasting, self.rank

    def toggle(self) -> None:
        """Switch typing between the command line (broadcast) and the focused rank's pane."""
        if self.broadcasting:
            self._panes.pane(self.rank).focus()
        else:
            self._bar.input.focus()

    def move(self, ranks: list[int], delta: int, crashed: bool = False) -> None:
        """Type into the rank `delta` places on among `ranks`, paging when it is not shown; from
        the command line (or a rank not among them), the focused rank (with `crashed`, the first)."""
        if self.broadcasting or self.rank not in ranks:
            rank = ranks[0] if crashed else self.rank
        else:
            rank = ranks[(ranks.index(self.rank) + delta) % len(ranks)]
        self._panes.focus_rank(rank)
