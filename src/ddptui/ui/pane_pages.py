"""`PanePages`: which ranks have panes on screen, a page of them or those picked in the state grid.

The app holds every rank's pane; this shows a page of them laid out as a grid or, with a state
grid, mounts panes only for the ranks picked in it (a pane unmounted is replaced by a new one,
fed the tail of its rank's output, when it is shown again).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from rich.text import Text
from textual.containers import Grid

from ddptui.core.model.state import RankState
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.rank_bar import has_crashed
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.state_grid import StateGrid

if TYPE_CHECKING:
    from ddptui.ui.app import DdptuiApp

PAGE_SIZE = 8
"""Panes shown at once; more ranks are paged (F3/F4 move the focus across pages)."""
REPLAY_BYTES = 128 * 1024
"""Output replayed into a pane mounted again (the core keeps every rank's output)."""


def grid_shape(count: int) -> tuple[int, int]:
    """Columns and rows for `count` panes."""
    if count <= 2:
        return count, 1
    if count <= 4:
        return 2, 2
    return (count + 1) // 2, 2


def new_panes(spec: LaunchSpec) -> list[RankPane]:
    """A pane for each rank of the job, none mounted yet."""
    return [
        RankPane(rank, columns=spec.columns, lines=spec.lines, history=spec.scrollback, id=f"rank-{rank}")
        for rank in range(spec.nproc)
    ]


def dress_pane(session: Session, pane: RankPane, state: RankState) -> RankPane:
    """Title and classes of a rank's pane for its state (mounted or not)."""
    pane.border_title = Text(inert(f"rank {pane.rank} · {state.describe()}"))
    rank = session.ranks[pane.rank] if pane.rank < len(session.ranks) else None
    who = rank.identity if rank is not None else None
    if rank is not None:
        pane.source = rank.output  # a skipped flood's scrollback is emulated again from it
    if who is not None:
        pane.show_identity(inert(f"local rank {who.local_rank} · {who.host} · pid {who.pid}"))
    pane.set_class(not state.alive, "-exited")
    pane.set_class(has_crashed(state), "-crashed")
    return pane


class PanePages:
    """The app's rank panes on screen: `app.page`, `app.shown` and the `#panes` grid."""

    def __init__(self, app: DdptuiApp) -> None:
        self._app = app
        self._lock = asyncio.Lock()

    def world(self, size: int) -> None:
        """A wrapped job's first rank said how many ranks there are: a pane for each."""
        app = self._app
        if app.panes and size == app.spec.nproc:
            return  # `ddptui listen --world-size N`: the panes exist since the start
        spec = app.spec = replace(app.spec, nproc=size)
        app.panes = new_panes(spec)
        app._rank_states.reset(size)
        if size > app.grid_threshold:
            app.state_grid = StateGrid(size, id="state-grid")
        app.shown = tuple(range(min(size, PAGE_SIZE)))
        app._mount_world()

    async def mount_world(self) -> None:
        """Mount the new panes (or the state grid, which mounts the panes picked in it)."""
        app = self._app
        grid = app.query_one("#panes", Grid)
        if app.state_grid is not None:
            await app.mount(app.state_grid, before=grid)
            app.set_interval(0.25, app._mark_grid)
        else:
            await grid.mount_all(app.panes)
        app.show_page(0)
        if app.state_grid is None:
            app.pane(0).focus()

    def show_page(self, page: int, focus: int | None = None) -> None:
        """Show the panes of one page of ranks and lay them out as a grid (then focus `focus`)."""
        app = self._app
        app.page = page
        first = page * PAGE_SIZE
        shown = range(first, min(first + PAGE_SIZE, app.spec.nproc))
        if app.state_grid is not None:
            self.show_ranks(shown, focus)
            return
        columns, rows = grid_shape(len(shown))
        grid = app.query_one("#panes", Grid)
        grid.styles.grid_size_columns, grid.styles.grid_size_rows = columns, rows
        for rank in range(app.spec.nproc):
            app.pane(rank).display = rank in shown
        pages = (app.spec.nproc + PAGE_SIZE - 1) // PAGE_SIZE
        app.sub_title = f"ranks {shown.start}-{shown.stop - 1} of {app.spec.nproc}" if pages > 1 else ""

    def show_ranks(self, ranks: Iterable[int], focus: int | None = None) -> None:
        """Mount panes for `ranks` (the first `PAGE_SIZE`), unmount the others (their output is kept)."""
        app = self._app
        app.shown = tuple(sorted(set(ranks)))[:PAGE_SIZE]
        app.sub_title = f"panes: {name_ranks(set(app.shown))} of {app.spec.nproc}"
        if app.state_grid is not None:
            app.state_grid.shown = frozenset(app.shown)
        app._mount_panes(focus)

    async def mount_panes(self, focus: int | None) -> None:
        """Make the mounted panes those of `shown`, in rank order; then type into `focus`.

        A removed widget cannot be mounted again: an unmounted pane is replaced by a new one,
        fed the tail of its rank's output, which the core keeps (see `replayed_pane`).
        """
        app = self._app
        async with self._lock:
            grid = app.query_one("#panes", Grid)
            gone = [pane for pane in grid.query_children(RankPane) if pane.rank not in app.shown]
            await grid.remove_children(gone)
            for pane in gone:
                app.panes[pane.rank] = self.replayed_pane(pane)
            mounted = {pane.rank for pane in grid.query_children(RankPane)}
            new = [app.pane(rank) for rank in app.shown if rank not in mounted]
            for pane in app.panes:
                pane.display = pane.rank in app.shown
            await grid.mount_all(new)
            grid.sort_children(key=lambda widget: widget.rank if isinstance(widget, RankPane) else -1)
            grid.styles.grid_size_columns, grid.styles.grid_size_rows = grid_shape(len(app.shown))
        if focus is not None and focus in app.shown:
            app.pane(focus).focus()

    def replayed_pane(self, old: RankPane) -> RankPane:
        """A new, unmounted pane for `old`'s rank, fed the tail of the rank's output."""
        session = self._app.session
        rank, terminal = old.rank, old.terminal
        pane = RankPane(
            rank,
            columns=terminal.columns,
            lines=terminal.lines,
            history=self._app.spec.scrollback,
            id=f"rank-{rank}",
        )
        pane.display = False
        if rank >= len(session.ranks):
            return pane
        output = session.ranks[rank].output
        start = max(output.start, output.end - REPLAY_BYTES)
        data = output.since(start)
        if start > output.start:  # start at a line, not inside an escape sequence
            data = data[data.find(b"\n") + 1 :]
        pane.feed(data)
        return dress_pane(session, pane, session.ranks[rank].state)

    def focus_rank(self, rank: int) -> None:
        """Type into `rank`'s pane, paging (or mounting it) when it is not shown."""
        app = self._app
        if app.state_grid is not None:
            if rank not in app.shown:
                self.show_page(rank // PAGE_SIZE, focus=rank)
                return
        elif rank // PAGE_SIZE != app.page:
            self.show_page(rank // PAGE_SIZE)
        app.call_after_refresh(app.pane(rank).focus)
