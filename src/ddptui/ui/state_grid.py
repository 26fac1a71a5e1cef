"""`StateGrid`: one cell per rank, coloured by its state and grouped by location, for many ranks.

Above a few ranks the panes cannot all be shown: the grid shows every rank at a glance and picks
which ranks get a pane. What it draws, and when, is `StateGridView`'s; this module adds the keys and
clicks that pick ranks, and the message that asks for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message

from ddptui.ui.state_grid_view import StateGridView


class StateGrid(StateGridView, can_focus=True):
    """The state grid with keys and clicks: ranks picked to be shown.

    Space picks the rank under the cursor, `g` its whole location, escape drops the pick (picked
    cells are drawn reversed); enter asks for the pick, or the cursor's rank, to be shown. A click
    on a cell asks for that rank (ctrl/shift+click: adds it to the ranks shown or takes it away), a
    click on a heading for its location. Each posts `StateGrid.Selected`. On a device mesh, `m`
    cycles the pair of dims the cells are laid out by.
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("left", "move(-1, 0)", "Previous rank", show=False),
        Binding("right", "move(1, 0)", "Next rank", show=False),
        Binding("up", "move(0, -1)", "Rank above", show=False),
        Binding("down", "move(0, 1)", "Rank below", show=False),
        Binding("home", "move(-1000000, 0)", "First rank", show=False),
        Binding("end", "move(1000000, 0)", "Last rank", show=False),
        Binding("space", "toggle_rank", "Pick rank"),
        Binding("g", "pick_group", "Pick location"),
        Binding("enter", "show", "Show picked"),
        Binding("escape", "clear", "Drop pick", show=False),
        Binding("m", "next_layout", "Mesh dims", show=False),
    ]

    @dataclass
    class Selected(Message):
        """The user picked ranks to show: the app gives them panes and the focus."""

        ranks: frozenset[int]
        """The ranks picked, never empty."""
        grid: StateGrid | None = field(default=None, repr=False)
        """The grid they were picked in."""

        @property
        def control(self) -> StateGrid | None:
            """The grid they were picked in (alias of `grid`)."""
            return self.grid

    def on_focus(self) -> None:
        """Draw the cursor."""
        self.redraw([self.cursor])

    def on_blur(self) -> None:
        """Hide the cursor."""
        self.redraw([self.cursor])

    # -- actions -----------------------------------------------------------------------------------
    def action_move(self, across: int, down: int) -> None:
        """Move the cursor `across` cells in drawing order, or `down` rows of cells."""
        rank = self.moved(self.cursor, across, down)
        if rank is not None:
            self.cursor = rank

    def action_toggle_rank(self) -> None:
        """Pick the rank under the cursor, or drop it from the pick."""
        self.selected = self.selected ^ {self.cursor}

    def action_pick_group(self) -> None:
        """Pick every rank at the cursor's location."""
        self.selected = self.location_of(self.cursor) if self.count else frozenset()

    def action_show(self) -> None:
        """Ask for the picked ranks (or the cursor's rank) to be shown; the pick is then dropped."""
        if self.count:
            self.post_message(self.Selected(self.selected or frozenset({self.cursor}), self))
            self.selected = frozenset()

    def action_clear(self) -> None:
        """Drop the pick."""
        self.selected = frozenset()

    def action_next_layout(self) -> None:
        """Lay the cells out by the next pair of mesh dims that fits, then by location, and round."""
        axes = self.following_axes()
        if axes is not None:
            self.axes = axes

    def on_click(self, event: events.Click) -> None:
        """A cell asks for its rank (ctrl/shift: toggles it among those shown); a heading, its location."""
        offset = event.get_content_offset(self)
        if offset is None:
            return
        row = offset.y + self.scroll_offset.y
        rank = self.rank_at(offset.x, row)
        if rank is not None:
            self.cursor = rank
            toggle = event.ctrl or event.shift or event.meta
            ranks = self.shown ^ {rank} if toggle else frozenset({rank})
        else:
            ranks = self.group_at(row)
        if ranks:
            self.post_message(self.Selected(ranks, self))
