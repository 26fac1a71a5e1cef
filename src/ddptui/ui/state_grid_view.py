"""`StateGridView`: the display of the state grid, one cell per rank, under `StateGrid`, which adds
the keys and clicks.

It is drawn on the Line API from cached rows. A state change marks its row dirty; a burst of
changes is drawn once, on the next frame, so 256 ranks stepping together cost one redraw of the
rows they touch (one layout when ranks move between locations). Where each cell goes is
`state_grid_layout` (by location) or `state_grid_mesh` (by two dims of the job's device mesh, once
known); what cells, headings and the legend look like is `state_grid_cells`.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import ClassVar

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Region, Size
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


class StateGridView(ScrollView):
    """Every rank as a cell coloured by its state, under a heading per location; display only.

    It knows states, not sessions: it is handed each `RankState` (`set_state`), the marks derived
    from them (`set_marks`) and the ranks that have a pane (`shown`, drawn bold and underlined);
    picked ranks (`selected`) are drawn reversed, the `cursor` as a light block while focused.
    Given the job's device `mesh`, the cells are laid out by two of its dims (`axes`).
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        *(f"state-grid--{phase.value}" for phase in Phase),
        "state-grid--heading",
        "state-grid--shown",
        "state-grid--selected",
        "state-grid--cursor",
    }
    """A style per phase, headings and the legend, and what a pane, the pick and the cursor add."""

    DEFAULT_CSS = """
    StateGridView {
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

    def moved(self, rank: int, across: int, down: int) -> int | None:
        """The rank `across` cells on from `rank` in drawing order, or `down` rows of cells; None if none."""
        return self._layout.moved(rank, across, down)

    def location_of(self, rank: int) -> frozenset[int]:
        """Every rank at `rank`'s location (`rank` included)."""
        key = self._keys[rank]
        return frozenset(other for other, where in enumerate(self._keys) if where == key)

    def following_axes(self) -> Axes | None:
        """The next pair of mesh dims that fits after the ones shown, then `()` (by location); None
        without a mesh."""
        if self.mesh is None:
            return None
        return next_axes(self.mesh, self._layout.axes, self.cell_width, self._content_width())

    def redraw(self, ranks: Iterable[int]) -> None:
        """Draw these ranks' cells again on the next frame."""
        self._dirty.update(ranks)
        self._schedule()

    # -- watchers --------------------------------------------------------------------------------
    def validate_cursor(self, cursor: int) -> int:
        """Keep the cursor on a rank."""
        return min(max(cursor, 0), max(self.count - 1, 0))

    def watch_selected(self, before: frozenset[int], after: frozenset[int]) -> None:
        """Redraw the cells picked or dropped."""
        self.redraw(before ^ after)

    def watch_shown(self, before: frozenset[int], after: frozenset[int]) -> None:
        """Redraw the cells that got or lost a pane."""
        self.redraw(before ^ after)

    def watch_cursor(self, before: int, after: int) -> None:
        """Redraw the two cells, and bring the cursor into view."""
        self.redraw((before, after))
        self._scroll_to_cursor()

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
