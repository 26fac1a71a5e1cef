"""`PaneGrid`: every rank's pane, and which of them are on screen: a page, or those picked in the
state grid.

Without a state grid, the grid holds every pane and shows a page of them. With one (many ranks),
it mounts panes only for the ranks picked in it; a pane unmounted is replaced by a new one, fed
the tail of its rank's output, when it is shown again. Either way it says which ranks it shows
with a `PaneGrid.Shown` message.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.containers import Grid
from textual.message import Message
from textual.reactive import reactive

from ddptui.core.model.state import RankState
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.core.model.topology import Topology
from ddptui.core.session.rank import Rank
from ddptui.ui.rank_bar import has_crashed
from ddptui.ui.rank_pane import RankPane

PAGE_SIZE = 8
"""Panes shown at once; more ranks are paged (F3/F4 move the focus across pages)."""
REPLAY_BYTES = 128 * 1024
"""Output replayed into a pane mounted again (the core keeps every rank's output)."""

RankOf = Callable[[int], Rank | None]
"""The core's rank of an index, None before it exists: its output, identity and state."""


@dataclass(frozen=True)
class PaneSize:
    """What a new pane's terminal starts with, before the layout gives it its size."""

    columns: int
    lines: int
    history: int
    """Lines of scrollback."""


def grid_shape(count: int) -> tuple[int, int]:
    """Columns and rows for `count` panes."""
    if count <= 2:
        return count, 1
    if count <= 4:
        return 2, 2
    return (count + 1) // 2, 2


def dress_pane(pane: RankPane, state: RankState, rank: Rank | None, label: str = "") -> RankPane:
    """Title and classes of a rank's pane for its state (mounted or not); `label` names the rank
    (`rank 3 (dp 1, tp 1)`), its number when empty; a rank its launcher restarted says its attempt."""
    attempt = f" · attempt {rank.attempt}" if rank is not None and rank.attempts else ""
    pane.border_title = Text(inert(f"{label or f'rank {pane.rank}'}{attempt} · {state.describe()}"))
    who = rank.identity if rank is not None else None
    if rank is not None:
        pane.source = rank.output  # a skipped flood's scrollback is emulated again from it
    if who is not None:
        pane.show_identity(inert(f"local rank {who.local_rank} · {who.host} · pid {who.pid}"))
    pane.set_class(not state.alive, "-exited")
    pane.set_class(has_crashed(state), "-crashed")
    return pane


class PaneGrid(Grid):
    """The ranks' panes, a page of them or those picked in a state grid (`picking`)."""

    topology: reactive[Topology] = reactive(Topology, init=False)
    """The job's groups and meshes as known: a pane's title says its rank's mesh coordinates."""

    @dataclass
    class Shown(Message):
        """Other ranks' panes are on screen: the app names them, a state grid marks them."""

        grid: PaneGrid
        ranks: tuple[int, ...]
        """The ranks whose panes are shown, lowest first."""
        caption: str
        """Which ranks those are, of how many, in words (empty when a single page shows them all)."""

        @property
        def control(self) -> PaneGrid:
            """The grid that shows them."""
            return self.grid

    def __init__(
        self, size: PaneSize, count: int, rank_of: RankOf, *, picking: bool, id: str | None = None
    ) -> None:
        """Panes of `size` for `count` ranks, dressed from `rank_of`; `picking`: a state grid picks them."""
        super().__init__(id=id)
        self._pane_size = size
        self._rank_of = rank_of
        self._mounting = asyncio.Lock()
        """Held while panes are mounted and removed: picks in a row must not interleave."""
        self.panes: list[RankPane] = []
        """Every rank's pane, mounted or not (a pane mounted again is a new one)."""
        self.picking = picking
        """Panes only for the ranks picked in a state grid, not every rank's paged."""
        self.page = 0
        """The page of ranks shown (without a state grid)."""
        self.shown: tuple[int, ...] = ()
        """The ranks whose panes are on screen."""
        self.set_world(count, picking)

    @property
    def count(self) -> int:
        """How many ranks the job has (and so panes)."""
        return len(self.panes)

    def pane(self, rank: int) -> RankPane:
        """The pane of a rank."""
        return self.panes[rank]

    def set_world(self, count: int, picking: bool) -> None:
        """A pane for each of `count` ranks, none mounted yet; mount them with `mount_world`."""
        size = self._pane_size
        self.panes = [
            RankPane(rank, columns=size.columns, lines=size.lines, history=size.history, id=f"rank-{rank}")
            for rank in range(count)
        ]
        self.picking, self.page = picking, 0
        self.shown = tuple(range(min(count, PAGE_SIZE)))

    def compose(self) -> ComposeResult:
        """Every pane, or with a state grid the first page's (the others once picked)."""
        if not self.picking:
            yield from self.panes
            return
        for pane in self.panes[PAGE_SIZE:]:
            pane.display = False
        yield from self.panes[:PAGE_SIZE]

    async def mount_world(self) -> None:
        """Mount the panes `set_world` made (with a state grid: those of the first page)."""
        if not self.picking:
            await self.mount_all(self.panes)
        self.show_page(0)
        if not self.picking and self.panes:
            self.panes[0].focus()

    def dress(self, rank: int, state: RankState) -> None:
        """Title and classes of a rank's pane for its new state."""
        dress_pane(self.panes[rank], state, self._rank_of(rank), self.topology.label(rank))

    def watch_topology(self) -> None:
        """Title every pane again, with its rank's coordinates."""
        for pane in self.panes:
            rank = self._rank_of(pane.rank)
            if rank is not None:
                self.dress(pane.rank, rank.state)

    def show_page(self, page: int, focus: int | None = None) -> None:
        """Show the panes of one page of ranks and lay them out as a grid (then focus `focus`)."""
        self.page = page
        first = page * PAGE_SIZE
        shown = range(first, min(first + PAGE_SIZE, self.count))
        if self.picking:
            self.show_ranks(shown, focus)
            return
        self._lay_out(len(shown))
        for pane in self.panes:
            pane.display = pane.rank in shown
        self.shown = tuple(shown)
        pages = (self.count + PAGE_SIZE - 1) // PAGE_SIZE
        caption = f"ranks {shown.start}-{shown.stop - 1} of {self.count}" if pages > 1 else ""
        self.post_message(self.Shown(self, self.shown, caption))

    def show_ranks(self, ranks: Iterable[int], focus: int | None = None) -> None:
        """Mount panes for `ranks` (the first `PAGE_SIZE`), unmount the others (their output is kept)."""
        self.shown = tuple(sorted(set(ranks)))[:PAGE_SIZE]
        self.post_message(
            self.Shown(self, self.shown, f"panes: {name_ranks(set(self.shown))} of {self.count}")
        )
        self._mount_panes(focus)

    def focus_rank(self, rank: int) -> None:
        """Type into `rank`'s pane, paging (or mounting it) when it is not shown."""
        if self.picking:
            if rank not in self.shown:
                self.show_page(rank // PAGE_SIZE, focus=rank)
                return
        elif rank // PAGE_SIZE != self.page:
            self.show_page(rank // PAGE_SIZE)
        self.call_after_refresh(self.panes[rank].focus)

    def _lay_out(self, count: int) -> None:
        """Columns and rows for `count` panes."""
        self.styles.grid_size_columns, self.styles.grid_size_rows = grid_shape(count)

    @work(group="panes")
    async def _mount_panes(self, focus: int | None) -> None:
        """Make the mounted panes those of `shown`, in rank order; then type into `focus`.

        A removed widget cannot be mounted again: an unmounted pane is replaced by a new one,
        fed the tail of its rank's output, which the core keeps (see `_replayed`).
        """
        async with self._mounting:
            gone = [pane for pane in self.query_children(RankPane) if pane.rank not in self.shown]
            await self.remove_children(gone)
            for pane in gone:
                self.panes[pane.rank] = self._replayed(pane)
            mounted = {pane.rank for pane in self.query_children(RankPane)}
            new = [self.panes[rank] for rank in self.shown if rank not in mounted]
            for pane in self.panes:
                pane.display = pane.rank in self.shown
            await self.mount_all(new)
            self.sort_children(key=lambda widget: widget.rank if isinstance(widget, RankPane) else -1)
            self._lay_out(len(self.shown))
        if focus is not None and focus in self.shown:
            self.panes[focus].focus()

    def _replayed(self, old: RankPane) -> RankPane:
        """A new, unmounted pane for `old`'s rank, fed the tail of the rank's output."""
        terminal = old.terminal
        pane = RankPane(
            old.rank,
            columns=terminal.columns,
            lines=terminal.lines,
            history=self._pane_size.history,
            id=old.id,
        )
        pane.display = False
        rank = self._rank_of(old.rank)
        if rank is None:
            return pane
        output = rank.output
        start = max(output.start, output.end - REPLAY_BYTES)
        data = output.since(start)
        if start > output.start:  # start at a line, not inside an escape sequence
            data = data[data.find(b"\n") + 1 :]
        pane.feed(data)
        return dress_pane(pane, rank.state, rank, self.topology.label(old.rank))
