"""Ranks carry their mesh coordinates: pane titles, the rank bar, the command bar's targets, and a
state grid laid out by two mesh dims (widget on synthetic states, then the app on real gloo ranks)."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from conftest import SCRIPTS, until
from test_app import all_paused
from test_state_grid import GridApp, crashed, paused, waiting
from textual.pilot import Pilot

from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.topology import Mesh
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp
from ddptui.ui.mesh_slice import slice_words
from ddptui.ui.rank_bar import RankBar
from ddptui.ui.rank_pane import RankPane
from ddptui.ui.state_grid_mesh import Axes, choices, next_axes, pick

PAUSE = "tests/scripts/mesh_pause.py"
GRID = "tests/scripts/mesh_grid.py"


def mesh(dims: tuple[str, ...], shape: tuple[int, ...]) -> Mesh:
    """A mesh of `shape` over ranks 0.. in row-major order, as `init_device_mesh` makes it."""
    coordinates = itertools.product(*(range(size) for size in shape))
    return Mesh(dims, dict(enumerate(coordinates)))


def title(app: DdptuiApp, rank: int) -> str:
    """A rank's pane title."""
    return str(app.pane(rank).border_title)


def bar_text(app: DdptuiApp) -> str:
    """What the rank bar shows."""
    return str(app.query_one(RankBar).render())


# -- words and layouts, on made-up meshes ------------------------------------------------------------


def axes(shape: Mesh, chosen: Axes | None, count: int, cell_width: int, room: int) -> Axes | None:
    """The dims `pick` lays the grid out by, None for by location."""
    picked = pick(shape, chosen, count, cell_width, room)
    return None if picked is None else picked.axes


def test_a_rank_set_in_mesh_words_when_it_is_a_box_of_the_mesh() -> None:
    square = mesh(("dp", "tp"), (2, 2))
    assert slice_words(square, {3}) == "dp1 tp1"
    assert slice_words(square, {2, 3}) == "dp1"
    assert slice_words(square, {0, 2}) == "tp0"
    assert slice_words(square, {0, 3}) == ""  # not a box
    assert slice_words(square, {0, 1, 2, 3}) == ""  # the whole mesh: the rank numbers say it
    assert slice_words(square, {4}) == "" and slice_words(None, {0}) == ""
    cube = mesh(("pp", "dp", "tp"), (1, 4, 2))
    assert slice_words(cube, {2, 3, 4, 5}) == "dp1-2"  # pp has one index: never said


def test_the_grid_picks_the_two_largest_dims_with_fewer_rows_when_they_fit() -> None:
    assert axes(mesh(("dp", "tp"), (4, 4)), None, 16, 3, 80) == ("dp", "tp")
    assert axes(mesh(("dp", "tp"), (8, 2)), None, 16, 3, 80) == ("tp", "dp")
    three = mesh(("pp", "dp", "tp"), (2, 2, 4))
    assert axes(three, None, 16, 3, 80) == ("dp", "tp")
    assert axes(three, ("pp", "dp"), 16, 3, 80) == ("pp", "dp")
    assert axes(mesh(("dp",), (16,)), None, 16, 3, 80) == ("", "dp")
    wide = mesh(("dp", "tp"), (2, 64))
    assert axes(wide, None, 128, 4, 80) == ("tp", "dp")
    assert pick(wide, None, 128, 4, 8) is None  # nothing fits: by location
    assert pick(mesh(("dp", "tp"), (4, 4)), (), 16, 3, 80) is None
    assert pick(mesh(("dp", "tp"), (4, 4)), None, 8, 3, 80) is None  # ranks the grid does not have
    assert choices(three)[:2] == [("pp", "dp"), ("pp", "tp")]
    square = mesh(("dp", "tp"), (4, 4))
    assert next_axes(square, ("dp", "tp"), 3, 80) == ("tp", "dp")
    assert next_axes(square, ("tp", "dp"), 3, 80) == ()
    assert next_axes(square, (), 3, 80) == ("dp", "tp")


def mixed16() -> list[RankState]:
    """16 ranks: dp 3 waiting at :30, rank 5 crashed, the others paused at :28."""
    states = [*[paused(28)] * 12, *[waiting(30)] * 4]
    states[5] = crashed(12)
    return states


async def test_a_mesh_lays_the_grid_out_by_its_dims_and_m_cycles_them() -> None:
    app = GridApp(mixed16())
    async with app.run_test(size=(130, 20)) as pilot:
        grid = app.grid
        await pilot.pause()
        by_location = grid.lines_text()
        grid.mesh = mesh(("dp", "tp"), (4, 4))
        await pilot.pause(0.1)
        assert grid.lines_text()[0] == by_location[0]
        assert grid.lines_text()[1:] == [
            "  tp   0  1  2  3   · m: other dims",
            "dp 0   0  1  2  3",
            "dp 1   4  5  6  7",
            "dp 2   8  9 10 11",
            "dp 3  12 13 14 15",
            "train.py:28 · 11 paused",
            "train.py:12 · 1 crashed · dp1 tp1",
            "train.py:30 · 4 waiting · dp3",
        ]
        assert (
            grid.get_content_height(grid.size, grid.size, grid.size.width) == 7 + grid.SPARE_ROWS
        )  # one heading
        cell = grid.cell_region(9)
        assert cell is not None and (cell.x, cell.y) == (8, 4)
        await pilot.click(grid, offset=(cell.x + 1, cell.y))
        assert app.asked[-1] == {9}
        await pilot.click(grid, offset=(1, cell.y))  # the row's label: no rank
        await pilot.click(grid, offset=(0, 8))  # dp 3's heading picks its location
        assert app.asked[1:] == [{12, 13, 14, 15}]
        grid.focus()
        grid.cursor = 5
        await pilot.press("down", "right")
        assert grid.cursor == 10
        await pilot.press("m")
        await pilot.pause(0.1)
        assert grid.axes == ("tp", "dp")
        assert grid.lines_text()[1:3] == ["  dp   0  1  2  3   · m: other dims", "tp 0   0  4  8 12"]
        await pilot.press("m")
        await pilot.pause(0.1)
        assert grid.axes == () and grid.lines_text()[1:] == by_location[1:]


def test_mesh_grid_snapshot(snap_compare: Callable[..., bool]) -> None:
    app = GridApp(mixed16())

    async def prepare(pilot: Pilot[None]) -> None:
        grid = app.grid
        grid.mesh = mesh(("dp", "tp"), (4, 4))
        grid.set_marks(root=5, missing={12})
        grid.shown = frozenset({0, 1, 2, 3})
        grid.focus()
        grid.cursor = 6
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(90, 14), run_before=prepare)


# -- the app on real ranks ---------------------------------------------------------------------------


def spec(script: str, nproc: int) -> LaunchSpec:
    """A gloo job of `nproc` ranks."""
    return LaunchSpec(target=str(SCRIPTS.parent.parent / script), nproc=nproc, stall_timeout=3)


async def test_pane_titles_the_rank_bar_and_targets_say_mesh_coordinates() -> None:
    app = DdptuiApp(Session(spec(PAUSE, 4)))
    async with app.run_test(size=(160, 40)) as pilot:
        await until(pilot, lambda: all_paused(app), 90)
        await until(pilot, lambda: title(app, 3).startswith("rank 3 (dp 1, tp 1) · paused at "))
        assert [title(app, r).split(" · ")[0] for r in range(4)] == [
            "rank 0 (dp 0, tp 0)",
            "rank 1 (dp 0, tp 1)",
            "rank 2 (dp 1, tp 0)",
            "rank 3 (dp 1, tp 1)",
        ]
        await until(pilot, lambda: " r0-3  paused at " in bar_text(app))  # the whole mesh: nothing to say
        await pilot.press("f2", *"@3 n", "enter")  # rank 3 waits in the barrier for the others
        ranks = app.session.ranks
        await until(pilot, lambda: ranks[3].state.phase is Phase.WAITING and not app.session.lockstep.command)
        await until(pilot, lambda: " r3 dp1 tp1  waiting" in bar_text(app))
        assert " r0-2  paused at " in bar_text(app)  # not a box of the mesh
        await pilot.press(*":ranks tp=0", "enter")
        await until(
            pilot, lambda: "BROADCAST → tp=0 (ranks 0,2)" in str(app.command_bar.query_one("#mode").render())
        )
        await pilot.press(*":ranks all", "enter")
        await until(pilot, lambda: "BROADCAST → all" in str(app.command_bar.query_one("#mode").render()))
        app.session.kill_now()


async def test_sixteen_ranks_on_a_mesh_are_laid_out_by_dp_and_tp() -> None:
    app = DdptuiApp(Session(spec(GRID, 16)))
    async with app.run_test(size=(120, 40)) as pilot:
        grid = app.state_grid
        assert grid is not None
        await until(pilot, lambda: all_paused(app), 110)
        await until(pilot, lambda: grid.lines_text()[1:2] == ["  tp   0  1  2  3   · m: other dims"])
        lines = grid.lines_text()
        assert lines[2:6] == [
            "dp 0   0  1  2  3",
            "dp 1   4  5  6  7",
            "dp 2   8  9 10 11",
            "dp 3  12 13 14 15",
        ]
        assert lines[6:] == [f"{GRID}:13 · 12 paused · dp0-2", f"{GRID}:10 · 4 paused · dp3"]
        assert title(app, 6).startswith("rank 6 (dp 1, tp 2) · paused at ")
        cell = grid.cell_region(14)
        assert cell is not None
        await pilot.click(grid, offset=(cell.x + 1, cell.y - grid.scroll_offset.y))
        await until(pilot, lambda: [pane.rank for pane in app.query(RankPane)] == [14])
        assert title(app, 14).startswith("rank 14 (dp 3, tp 2) · paused at ")
        app.session.kill_now()
