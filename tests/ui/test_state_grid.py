"""The state grid: a widget on synthetic states, then the app with 64 plain-Python ranks."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from conftest import SCRIPTS, steady_identities, until
from textual.app import App, ComposeResult
from textual.pilot import Pilot
from textual.strip import Strip

from ddptui.core.model.state import Crash, Frame, Phase, RankState
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.state_grid import StateGrid
from ddptui.ui.state_grid_layout import Row
from ddptui.ui.state_grid_layout import location as grid_location

SNAPSHOT_DIR = Path("/tmp/ddptui-snapshot")
BARRIER = "tests/scripts/plain_barrier.py"


def paused(line: int, file: str = "train.py") -> RankState:
    """Paused at `file:line`."""
    return RankState().paused(Frame(file, line, "main"), False)


def running(line: int) -> RankState:
    """Running on from `train.py:line`."""
    return paused(line).running()


def waiting(line: int) -> RankState:
    """Waiting in an all_reduce at `train.py:line`."""
    return running(line).waiting(Frame("train.py", line, "main"), "all_reduce")


def crashed(line: int, file: str = "train.py") -> RankState:
    """Crashed at `file:line`, in post-mortem."""
    return paused(line).crashed(Crash("ValueError", "bad", Frame(file, line, "main")))


def exited(code: int = 0) -> RankState:
    """Gone with status `code`."""
    return RankState().running().exited(code)


class CountingGrid(StateGrid):
    """A grid that counts the rows it draws."""

    drawn: list[Row]

    def _draw(self, row: Row) -> Strip:
        self.drawn.append(row)
        return super()._draw(row)


class GridApp(App[None]):
    """A state grid alone, recording what it asks to show."""

    CSS = "StateGrid { height: 1fr; }"

    def __init__(self, states: list[RankState]) -> None:
        super().__init__()
        self.grid = CountingGrid(len(states))
        self.grid.drawn = []
        self.grid.update_states(states)
        self.asked: list[frozenset[int]] = []

    def compose(self) -> ComposeResult:
        yield self.grid

    def on_state_grid_selected(self, event: StateGrid.Selected) -> None:
        self.asked.append(event.ranks)


def mixed() -> list[RankState]:
    """12 ranks: 0-5 paused at :28, 6-9 waiting at :30, 10 crashed in a file named like markup, 11 gone."""
    return [*[paused(28)] * 6, *[waiting(30)] * 4, crashed(3, "[red]odd[/red].py"), exited(0)]


async def test_cells_are_grouped_by_location_under_plain_text_headings() -> None:
    app = GridApp(mixed())
    async with app.run_test(size=(60, 16)) as pilot:
        await pilot.pause()
        lines = app.grid.lines_text()
        assert lines[0].startswith(" paused   running   waiting   exited   crashed  ")
        assert lines[1:] == [
            "train.py:28 · 6 paused",
            "  0  1  2  3  4  5",
            "train.py:30 · 4 waiting",
            "  6  7  8  9",
            "[red]odd[/red].py:3 · 1 crashed",
            " 10",
            "exited 0 · 1 rank",
            " 11",
        ]


async def test_a_burst_of_changes_is_drawn_once_and_only_where_cells_changed() -> None:
    app = GridApp([paused(28)] * 256)
    async with app.run_test(size=(80, 40)) as pilot:
        grid = app.grid
        await pilot.pause(0.1)
        rows = len(grid.lines_text())
        assert rows == 2 + 14  # legend, heading, 14 rows of 19 cells (79 columns, 4 a cell)
        grid.drawn.clear()
        grid.set_state(30, running(28))
        await pilot.pause(0.1)
        assert sorted(row.kind for row in grid.drawn) == ["cells", "heading"]
        assert 30 in grid.drawn[0].ranks + grid.drawn[1].ranks
        grid.drawn.clear()
        for rank in range(256):  # the whole job steps: each row is drawn once, not once a rank
            grid.set_state(rank, waiting(28))
        await pilot.pause(0.1)
        assert 0 < len(grid.drawn) <= rows
        grid.drawn.clear()
        grid.update_states([paused(29)] * 256)  # every rank moves: one new layout
        await pilot.pause(0.1)
        assert grid.lines_text()[1] == "train.py:29 · 256 paused"
        assert len(grid.drawn) <= rows


async def test_keys_pick_ranks_and_enter_asks_for_them() -> None:
    app = GridApp(mixed())
    async with app.run_test(size=(60, 16)) as pilot:
        app.grid.focus()
        await pilot.press("right", "space", "down", "space")
        assert app.grid.selected == {1, 7}  # down keeps the column
        await pilot.press("enter")
        await pilot.pause()
        assert app.asked == [frozenset({1, 7})] and not app.grid.selected
        await pilot.press("down", "enter")  # nothing picked: the cursor's rank
        await pilot.pause()
        assert app.asked[-1] == {10}
        await pilot.press("up", "g")
        assert app.grid.selected == {6, 7, 8, 9}
        await pilot.press("escape", "end", "enter")
        await pilot.pause()
        assert app.asked[-1] == {11}


async def test_clicks_ask_for_a_rank_or_a_location() -> None:
    app = GridApp(mixed())
    async with app.run_test(size=(60, 16)) as pilot:
        grid = app.grid
        await pilot.pause()
        cell = grid.cell_region(8)
        assert cell is not None
        await pilot.click(StateGrid, offset=(cell.x + 1, cell.y))
        assert app.asked[-1] == {8} and grid.cursor == 8
        grid.shown = frozenset({0, 1})
        await pilot.click(StateGrid, offset=(cell.x + 1, cell.y), control=True)
        assert app.asked[-1] == {0, 1, 8}
        await pilot.click(StateGrid, offset=(0, cell.y - 1))  # the heading of ranks 6-9
        assert app.asked[-1] == {6, 7, 8, 9}
        asked = len(app.asked)
        await pilot.click(StateGrid, offset=(40, cell.y))  # no cell there
        assert len(app.asked) == asked


async def test_marks_and_colours() -> None:
    app = GridApp(mixed())
    async with app.run_test(size=(60, 16)) as pilot:
        grid = app.grid
        grid.set_marks(root=10, missing={7})
        await pilot.pause(0.1)
        lines = grid.lines_text()
        assert "!10" in lines and "  6? 7  8  9" in lines
        grid.set_marks()
        await pilot.pause(0.1)
        assert " 10" in grid.lines_text()
        styles = [grid._cell_style(rank) for rank in (0, 6, 10, 11)]
        assert len({style.bgcolor for style in styles}) == 4


def test_state_grid_snapshot(snap_compare: Callable[..., bool]) -> None:
    states = [*[paused(28)] * 20, *[running(28)] * 4, *[waiting(30)] * 14, crashed(12), exited(0)]
    app = GridApp(states)

    async def prepare(pilot: Pilot[None]) -> None:
        grid = app.grid
        grid.set_marks(root=38, missing={24})
        grid.shown = frozenset({0, 1, 2})
        grid.selected = frozenset({30, 31})
        grid.focus()
        grid.cursor = 5
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(64, 12), run_before=prepare)


# -- the app with 64 plain-Python ranks --------------------------------------------------------


def spec(script: Path, nproc: int, *args: str) -> LaunchSpec:
    """A plain-Python job."""
    return LaunchSpec(target=str(script), args=args, nproc=nproc, stall_timeout=1)


def all_paused(app: DdptuiApp) -> bool:
    """Every rank at its prompt."""
    ranks = app.session.ranks
    return len(ranks) == len(app.panes) and all(r.state.at_prompt and r.prompt_shown() for r in ranks)


def mounted(app: DdptuiApp) -> list[int]:
    """The ranks whose panes are mounted."""
    return [pane.rank for pane in app.query(RankPane)]


def pane_text(app: DdptuiApp, rank: int) -> str:
    """What a mounted rank pane shows."""
    return app.query_one(f"#rank-{rank}", RankPane).terminal.text()


async def click_rank(pilot: Pilot[int], grid: StateGrid, rank: int) -> None:
    """Click a rank's cell."""
    cell = grid.cell_region(rank)
    assert cell is not None
    await pilot.click(grid, offset=(cell.x + 1, cell.y - grid.scroll_offset.y))


async def test_sixty_four_ranks_a_grid_panes_for_the_picked_and_lockstep_for_all() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "plain_barrier.py", 64)))
    async with app.run_test(size=(160, 50)) as pilot:
        grid = app.state_grid
        assert grid is not None
        await until(pilot, lambda: all_paused(app), timeout=90)
        assert mounted(app) == list(range(8))
        await until(pilot, lambda: f"{BARRIER}:45 · 64 paused" in grid.lines_text())

        await click_rank(pilot, grid, 40)  # one rank's pane, and the keys
        await until(pilot, lambda: mounted(app) == [40] and app.focused is app.pane(40))
        await pilot.press("f10")  # still a broadcast to every rank
        await until(pilot, lambda: f"{BARRIER}:46 · 64 paused" in grid.lines_text() and all_paused(app))
        await until(pilot, lambda: "-> value += 2" in pane_text(app, 40))

        await pilot.press("f9")
        await pilot.pause()
        assert app.focused is grid
        grid.cursor = 3
        await pilot.press("space")
        grid.cursor = 50
        await pilot.press("space", "enter")
        await until(pilot, lambda: mounted(app) == [3, 50] and app.focused is app.pane(3))

        await pilot.press("f2", *"@1-63 c", "enter")  # they meet rank 0's barrier and wait for it
        await until(pilot, lambda: f"{BARRIER}:40 · 63 waiting" in grid.lines_text(), timeout=60)
        assert "(Pdb r50) c" in pane_text(app, 50)
        await pilot.press("f5")
        await until(pilot, lambda: "exited 0 · 64 ranks" in grid.lines_text(), timeout=30)

        for rank in (40, 63):  # unmounted after stepping / never mounted: the output is kept
            await click_rank(pilot, grid, rank)
            await until(
                pilot,
                lambda r=rank: f"rank {r} passed the barrier with value {r * 10 + 3}" in pane_text(app, r),
            )
        app.session.kill_now()


def test_sixty_four_ranks_snapshot(snap_compare: Callable[..., bool]) -> None:
    SNAPSHOT_DIR.mkdir(exist_ok=True)
    shutil.copy(SCRIPTS / "plain_barrier.py", SNAPSHOT_DIR / "plain_barrier.py")
    # --non-stop: the others stay in the barrier as they are (all-stop would interrupt each one,
    # and the panes would show that as each signal lands)
    app = DdptuiApp(
        Session(replace(spec(SNAPSHOT_DIR / "plain_barrier.py", 64, "--crash", "5"), all_stop=False))
    )

    async def settle(pilot: Pilot[int]) -> None:
        """Rank 5 crashes before the barrier (the root cause); the others wait there for it."""
        await until(pilot, lambda: all_paused(app), timeout=90)
        await pilot.press("f5")
        ranks = app.session.ranks
        await until(
            pilot,
            lambda: (
                ranks[5].state.crash is not None
                and all(r.state.phase is Phase.WAITING for r in ranks if r.index != 5)
                and not app.session.lockstep.command
            ),
            timeout=60,
        )
        await until(pilot, lambda: app.state_grid is not None and app.state_grid.marks == {5: "!"})
        panes = list(app.query(RankPane))
        await until(pilot, lambda: all(p.terminal.pending == 0 for p in panes))
        await steady_identities(pilot, app)
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=(120, 40), run_before=settle)


def test_location_keeps_a_running_rank_where_it_stood() -> None:
    assert grid_location(running(28)) == grid_location(paused(28)) == "train.py:28"
    assert grid_location(exited(3)) == "exited 3"
    assert grid_location(RankState()) == "starting"
    assert grid_location(crashed(12)) == "train.py:12"
