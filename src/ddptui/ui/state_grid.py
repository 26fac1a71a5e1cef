"""`StateGrid`: one cell per rank, coloured by its state and grouped by location, for many ranks.

Above a few ranks the panes cannot all be shown: the grid shows every rank at a glance and picks
which ranks get a pane. It is drawn on the Line API from cached rows. A state change marks its
row dirty; a burst of changes is drawn once, on the next frame, so 256 ranks stepping together
cost one redraw of the rows they touch (one layout when ranks move between locations).

Where each cell goes is `state_grid_layout` (by location) or `state_grid_mesh` (by two dims of
the job's device mesh, once known); what cells, headings and the legend look like is
`state_grid_cells`; this module is the widget: its keys, clicks, and when it redraws.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.timer import Timer

from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.topology import Mesh
from ddptui.ui.mesh_slice import slice_words
from ddptui.ui.state_grid_cells import MISSING_MARK, ROOT_MARK, CellStyles, cells, heading, legend, look
from ddptui.ui.state_grid_layout import GridLayout, Row, location
from ddptui.ui.state_grid_mesh import Axes, lay_out, next_axes


class StateGrid(ScrollView, can_focus=True):
    """Every rank as a cell coloured by its state, under a heading per location.

    The widget knows states, not sessions: the app hands it each `RankState` (`set_state`), the
    marks it derives (`set_marks`) and the ranks that have a pane (`shown`, drawn bold and
    underlined). Space picks the rank under the cursor, `g` its whole location, escape drops the
    pick (picked cells are drawn reversed); enter asks for the pick, or the cursor's rank, to be
    shown. A click on a cell asks for that rank (ctrl/shift+click: adds it to the ranks shown or
    takes it away), a click on a heading for its location. Each posts `StateGrid.Selected`.
    Given the job's device `mesh`, the cells are laid out by two of its dims (`m` cycles them).
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

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"state-grid--{phase.value}" for phase in Phase),
        "state-grid--heading",
        "state-grid--shown",
        "state-grid--selected",
        "state-grid--cursor",
    }
    """A style per phase, headings and the legend, and what a pane, the pick and the cursor add."""

    DEFAULT_CSS = """
    StateGrid {
        height: auto;
        overflow-x: hidden;
        scrollbar-gutter: stable;
        scrollbar-size-vertical: 1;
        scrollbar-size-horizontal: 0;
        background: $surface;
        & > .state-grid--starting { background: $panel; color: $text-disabled; }
        & > .state-grid--running { background: $primary; color: auto 90%; }
        & > .state-grid--paused { background: $success; color: auto 90%; }
        & > .state-grid--waiting { background: $warning; color: auto 90%; }
        & > .state-grid--exited { background: $panel; color: $text-muted; }
        & > .state-grid--crashed { background: $error; color: auto 90%; text-style: bold; }
        & > .state-grid--heading { color: $text-muted; }
        & > .state-grid--shown { text-style: bold underline; }
        & > .state-grid--selected { text-style: reverse; }
        & > .state-grid--cursor { background: $foreground 90%; color: $background; }
        &:focus > .state-grid--heading { color: $text; }
    }
    """

    FRAME_INTERVAL: ClassVar[float] = 1 / 30
    """Seconds a change waits for more before the grid redraws: one redraw per burst."""

    SPARE_ROWS: ClassVar[int] = 4
    """Rows kept for more locations; beyond them the grid scrolls. Its height never follows the
    states: a grid that grew would shrink the panes below, and so every rank's terminal."""

    selected: reactive[frozenset[int]] = reactive(frozenset, init=False)
    """The ranks picked with the keyboard, not yet shown (reversed)."""
    shown: reactive[frozenset[int]] = reactive(frozenset, init=False)
    """The ranks that have a pane (bold, underlined); set by the app."""
    cursor: reactive[int] = reactive(0, init=False)
    """The rank under the keyboard cursor (a light block while the grid has the focus)."""
    mesh: reactive[Mesh | None] = reactive(None, init=False, layout=True)
    """The job's device mesh once known (set by the app): cells laid out by two of its dims."""
    axes: reactive[Axes | None] = reactive(None, init=False, layout=True)
    """The mesh dims along the rows and the columns; None: the two largest that fit; `()`: by
    location, as without a mesh."""

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

    def __init__(
        self, count: int = 0, *, name: str | None = None, id: str | None = None, classes: str | None = None
    ) -> None:
        """A grid of `count` ranks, all `starting` until told otherwise."""
        super().__init__(name=name, id=id, classes=classes)
        self._states: list[RankState] = []
        self._keys: list[str] = []
        self._marks: dict[int, str] = {}
        self._layout = GridLayout()
        """The rows of cells, and where each rank's cell is in them."""
        self._strips: dict[int, Strip] = {}
        self._cell_styles = CellStyles(self)
        self._dirty: set[int] = set()
        self._stale = True
        """The layout must be redone: ranks changed location."""
        self._laid_out: tuple[int, Mesh | None, Axes | None] = (0, None, None)
        """The width, mesh and axes the layout was made for: it is redone when one changes."""
        self._timer: Timer | None = None
        self.update_states([RankState()] * count)

    # -- public API ------------------------------------------------------------------------------
    @property
    def count(self) -> int:
        """How many ranks the grid shows."""
        return len(self._states)

    def update_states(self, states: Sequence[RankState]) -> None:
        """Set every rank's state (a different count redoes the layout)."""
        if len(states) != len(self._states):
            self._states = list(states)
            self._keys = [location(state) for state in states]
            self._stale = True
            self._schedule()
            return
        for rank, state in enumerate(states):
            self.set_state(rank, state)

    def set_state(self, rank: int, state: RankState) -> None:
        """Set one rank's state; drawn on the next frame with whatever else changes until then."""
        if state == self._states[rank]:
            return
        self._states[rank] = state
        key = location(state)
        if key != self._keys[rank]:
            self._keys[rank] = key
            self._stale = True
        self._dirty.add(rank)
        self._schedule()

    def set_marks(self, root: int | None = None, missing: Collection[int] = ()) -> None:
        """Mark the root cause of a failure, and ranks missing from a collective others wait in."""
        marks = {rank: MISSING_MARK for rank in missing if 0 <= rank < self.count}
        if root is not None and 0 <= root < self.count:
            marks[root] = ROOT_MARK
        if marks != self._marks:
            self._dirty.update(marks.keys() ^ self._marks.keys())
            self._dirty.update(rank for rank in marks if self._marks.get(rank) != marks[rank])
            self._marks = marks
            self._schedule()

    @property
    def marks(self) -> dict[int, str]:
        """The mark shown in each marked rank's cell."""
        return dict(self._marks)

    def rank_at(self, x: int, row: int) -> int | None:
        """The rank drawn at column `x` of grid row `row`, or None."""
        return self._layout.rank_at(x, row, self.cell_width)

    def cell_region(self, rank: int) -> Region | None:
        """Where a rank's cell is drawn, in grid rows (not scrolled); None before the layout."""
        place = self._layout.start(rank, self.cell_width)
        return None if place is None else Region(*place, self.cell_width, 1)

    def group_at(self, row: int) -> frozenset[int]:
        """The ranks of the location whose heading is grid row `row` (empty for any other row)."""
        rows = self._layout.rows
        if not 0 <= row < len(rows) or rows[row].kind != "heading":
            return frozenset()
        return frozenset(self._layout.ranks_of(rows[row].group))

    @property
    def cell_width(self) -> int:
        """Cells are a mark and the rank number, right-aligned: `  7`, ` 63`, `!255`."""
        return max(len(str(max(self.count - 1, 0))), 2) + 1

    def lines_text(self) -> list[str]:
        """The plain text of every row of the grid (for tests and copy-out)."""
        self._flush()
        return [self._row_strip(row).text.rstrip() for row in range(len(self._layout.rows))]

    # -- watchers --------------------------------------------------------------------------------
    def validate_cursor(self, cursor: int) -> int:
        """Keep the cursor on a rank."""
        return min(max(cursor, 0), max(self.count - 1, 0))

    def watch_selected(self, before: frozenset[int], after: frozenset[int]) -> None:
        """Redraw the cells picked or dropped."""
        self._dirty.update(before ^ after)
        self._schedule()

    def watch_shown(self, before: frozenset[int], after: frozenset[int]) -> None:
        """Redraw the cells that got or lost a pane."""
        self._dirty.update(before ^ after)
        self._schedule()

    def watch_cursor(self, before: int, after: int) -> None:
        """Redraw the two cells, and bring the cursor into view."""
        self._dirty.update((before, after))
        self._schedule()
        self._scroll_to_cursor()

    def on_focus(self) -> None:
        """Draw the cursor."""
        self._dirty.add(self.cursor)
        self._schedule()

    def on_blur(self) -> None:
        """Hide the cursor."""
        self._dirty.add(self.cursor)
        self._schedule()

    def on_resize(self, event: events.Resize) -> None:
        """Lay the cells out again for the new width."""
        self._flush()

    def on_mount(self) -> None:
        """Draw what was set before the grid was mounted."""
        self._schedule()

    def notify_style_update(self) -> None:
        """Drop cached styles and rows: the theme or the CSS changed."""
        super().notify_style_update()
        self._cell_styles.clear()
        self._strips.clear()

    # -- actions -----------------------------------------------------------------------------------
    def action_move(self, across: int, down: int) -> None:
        """Move the cursor `across` cells in drawing order, or `down` rows of cells."""
        rank = self._layout.moved(self.cursor, across, down)
        if rank is not None:
            self.cursor = rank

    def action_toggle_rank(self) -> None:
        """Pick the rank under the cursor, or drop it from the pick."""
        self.selected = self.selected ^ {self.cursor}

    def action_pick_group(self) -> None:
        """Pick every rank at the cursor's location."""
        key = self._keys[self.cursor] if self.count else None
        self.selected = frozenset(rank for rank, other in enumerate(self._keys) if other == key)

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
        if self.mesh is not None:
            room = self._content_width()
            self.axes = next_axes(self.mesh, self._layout.axes, self.cell_width, room)

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

    # -- drawing -----------------------------------------------------------------------------------
    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """The rows of every rank at one location, and `SPARE_ROWS`: the same whatever the states."""
        keys = [""] * self.count
        rows = lay_out(keys, self.mesh, self.axes, self.cell_width, width - self._scrollbar_width()).rows
        return len(rows) + self.SPARE_ROWS

    def render_line(self, y: int) -> Strip:
        """Row `y` of the view, from the row cache."""
        self._relayout_if_stale()
        row = y + self.scroll_offset.y
        if not 0 <= row < len(self._layout.rows):
            return Strip.blank(self.size.width, self._cell_styles.base())
        return self._row_strip(row)

    def _row_strip(self, row: int) -> Strip:
        """A row's strip, cached until a cell of it changes."""
        strip = self._strips.get(row)
        if strip is None:
            strip = self._strips[row] = self._draw(self._layout.rows[row]).adjust_cell_length(
                self.size.width, self._cell_styles.base()
            )
        return strip

    def _draw(self, row: Row) -> Strip:
        """One row: the legend, a heading, or cells (one segment per run of cells that look alike)."""
        label = self._cell_styles.heading()
        if row.kind == "legend":
            return legend(label, self._cell_styles.cell)
        if row.kind == "note":
            return Strip([Segment(row.label, label)])
        if row.kind == "heading":
            ranks = tuple(self._layout.ranks_of(row.group))
            where = slice_words(self.mesh, ranks) if self._layout.axes else ""
            return Strip([Segment(heading(row.group, (look(self._states[r]) for r in ranks), where), label)])
        drawn = cells(row.ranks, self._marks, self.cell_width - 1, self._cell_style)
        return Strip([Segment(row.label, label), *drawn]) if row.label else drawn

    def _cell_style(self, rank: int) -> Style:
        """How a rank's cell looks: its phase, whether it is selected, whether the cursor is on it."""
        cursor = rank == self.cursor and self.has_focus
        return self._cell_styles.cell(
            look(self._states[rank]), rank in self.shown, rank in self.selected, cursor
        )

    # -- layout and refresh --------------------------------------------------------------------
    def _schedule(self) -> None:
        """Redraw on the next frame (one timer however many changes arrive meanwhile)."""
        if self._timer is None and self.is_mounted:
            self._timer = self.set_timer(self.FRAME_INTERVAL, self._flush)

    def _flush(self) -> None:
        """Redo the layout if ranks moved, else redraw the rows of the cells that changed."""
        self._timer = None
        if self._relayout_if_stale():
            return
        rows: set[int] = set()
        for rank in self._dirty:
            place = self._layout.place.get(rank)
            if place is not None:
                rows.update((place[0], self._layout.headings[self._keys[rank]]))
        self._dirty.clear()
        for row in rows:
            self._strips.pop(row, None)
            self.refresh_line(row)

    def _relayout_if_stale(self) -> bool:
        """Lay the cells out again when needed (ranks moved; the width, mesh or axes changed);
        True if it did."""
        width = self._content_width()
        if width <= 0 or not (self._stale or (width, self.mesh, self.axes) != self._laid_out):
            return False
        self._stale = False
        self._laid_out = (width, self.mesh, self.axes)
        self._layout = lay_out(self._keys, self.mesh, self.axes, self.cell_width, width)
        self._dirty.clear()
        self._strips.clear()
        self.virtual_size = Size(width, len(self._layout.rows))
        self._scroll_update(self.virtual_size)  # as OptionList does: else a scrollbar outstays its need
        self.refresh()
        self._scroll_to_cursor()
        return True

    def _content_width(self) -> int:
        """Cells of width available to the grid (the scrollbar's column is kept free)."""
        return self.size.width - self._scrollbar_width()

    def _scrollbar_width(self) -> int:
        """The columns the vertical scrollbar (or its reserved gutter) takes."""
        return self.scrollbar_gutter.right

    def _scroll_to_cursor(self) -> None:
        """Scroll the cursor's row into view."""
        region = self.cell_region(self.cursor)
        if region is not None and self.is_mounted:
            self.scroll_to_region(region, animate=False, immediate=True)
