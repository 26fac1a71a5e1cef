"""`PaneGrid` on its own (pages, picks, the `Shown` it posts), and the app when the world is told late."""

from __future__ import annotations

import pytest
from conftest import until
from textual.app import App, ComposeResult
from textual.message import Message

from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.pane_grid import PaneGrid, PaneSize
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.state_grid import StateGrid


class OneGrid(App[None]):
    """A `PaneGrid` of `count` ranks that no session backs, alone on the screen."""

    def __init__(self, count: int, picking: bool) -> None:
        """Panes for `count` ranks; `picking`: only those shown are mounted, as under a state grid."""
        super().__init__()
        self.grid = PaneGrid(PaneSize(80, 24, 100), count, lambda index: None, picking=picking, id="panes")

    def compose(self) -> ComposeResult:
        """Just the grid."""
        yield self.grid


def shown_said(posted: list[Message]) -> list[tuple[tuple[int, ...], str]]:
    """What each `PaneGrid.Shown` said: the ranks and the caption."""
    return [(m.ranks, m.caption) for m in posted if isinstance(m, PaneGrid.Shown)]


def on_screen(app: App[None]) -> list[int]:
    """The ranks whose panes are mounted and displayed."""
    return [pane.rank for pane in app.query(RankPane) if pane.display]


async def test_ten_ranks_are_two_pages_and_focus_pages_across() -> None:
    app, posted = OneGrid(10, picking=False), list[Message]()
    async with app.run_test(size=(160, 40), message_hook=posted.append) as pilot:
        app.grid.show_page(0)
        await pilot.pause()
        assert on_screen(app) == list(range(8)) and app.grid.count == 10
        app.grid.focus_rank(9)
        await until(pilot, lambda: app.focused is app.grid.pane(9))
        assert on_screen(app) == [8, 9] and app.grid.page == 1 and app.grid.shown == (8, 9)
        assert shown_said(posted)[-1] == ((8, 9), "ranks 8-9 of 10")


async def test_picked_ranks_get_panes_and_an_unmounted_pane_comes_back_new() -> None:
    app, posted = OneGrid(20, picking=True), list[Message]()
    async with app.run_test(size=(160, 40), message_hook=posted.append) as pilot:
        first = app.grid.pane(3)
        app.grid.show_ranks([15, 3], focus=15)
        await until(pilot, lambda: on_screen(app) == [3, 15] and app.focused is app.grid.pane(15))
        assert shown_said(posted)[-1] == ((3, 15), "panes: ranks 3,15 of 20")
        assert app.grid.pane(3) is first  # still mounted: the same pane
        app.grid.show_ranks([15])
        await until(pilot, lambda: on_screen(app) == [15])
        assert app.grid.pane(3) is not first and not app.grid.pane(3).is_attached


@pytest.mark.parametrize("size", [4, 12])
async def test_a_world_told_late_gets_panes_and_above_the_threshold_a_state_grid(size: int) -> None:
    app = DdptuiApp(Session(LaunchSpec(target="listen", nproc=0, listen=("127.0.0.1", 0), stall_timeout=5)))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: any("export " in line for line in app.command_log.lines_text()))
        assert app.panes == [] and app.state_grid is None
        for told in list(app.session.on_world):  # as the core tells it once the first rank says
            told(size)
        shown = list(range(min(size, 8)))
        await until(pilot, lambda: [pane.rank for pane in app.query(RankPane)] == shown)
        assert len(app.panes) == size
        if size <= app.grid_threshold:
            await until(pilot, lambda: app.focused is app.pane(0))
            assert app.state_grid is None and not app.query(StateGrid)
        else:
            grid = app.state_grid
            assert grid is not None and grid.is_attached
            await until(pilot, lambda: grid.shown == frozenset(shown))
            assert app.sub_title == f"panes: ranks 0-7 of {size}"
        app.session.kill_now()
