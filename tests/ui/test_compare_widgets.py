"""The compare table, its sparkline and the watch panel: as widgets, and in the app on real ranks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from conftest import SCRIPTS, until
from test_app import all_paused, spec
from textual.app import App, ComposeResult

from ddptui.core.diagnosis.compare import Answer, compare
from ddptui.core.session.session import Session
from ddptui.ui.app import DdptuiApp
from ddptui.ui.compare_table import CompareTable
from ddptui.ui.rank_sparkline import RankSparkline
from ddptui.ui.stack_tree import StackTree

ANSWERS = {
    0: {"repr": "0.5", "key": "float:0.5", "number": 0.5},
    1: {"repr": "nan", "key": "float:nan", "number": "nan"},
    2: {"repr": "0.75", "key": "float:0.75", "number": 0.75},
    3: "KeyError: 'key'",
    4: {"repr": "0.5", "key": "float:0.5", "number": 0.5},
}


class TableApp(App[None]):
    """A compare table alone, fed a hand-made comparison (with a hostile-looking value)."""

    def compose(self) -> ComposeResult:
        """One table."""
        table = CompareTable()
        answers = dict(ANSWERS)
        answers[2] = {"repr": "[bold]0.75[/] \x1b[31m", "key": "float:0.75", "number": 0.75}
        table.title, table.comparison = ":compare loss", compare(answers)
        yield table


def test_compare_table_snapshot(snap_compare: Callable[..., bool]) -> None:
    assert snap_compare(TableApp(), terminal_size=(60, 10))


async def test_compare_table_marks_odd_rows_and_nan() -> None:
    app = TableApp()
    async with app.run_test(size=(60, 10)):
        table = app.query_one(CompareTable)
        rows = str(table.query_one(".rows").render()).splitlines()
        assert rows[0] == "  ranks 0,4 │ 0.5"
        assert "≠ rank 2 │ [bold]0.75[/] \\x1b[31m" in rows  # shown as typed, escapes visible
        assert "≠ rank 3 │ raised KeyError: 'key'" in rows
        bars = str(table.query_one(RankSparkline).render()).splitlines()[0]
        assert bars.startswith("▁×█·▁")  # rank 1 NaN, rank 3 raised


def replica(rank: int, value: str) -> dict[str, Any]:
    """Rank `rank`'s summary of a DTensor replicated across dp and sharded across tp (2x2 mesh)."""
    mesh, placements = {"dp": 2, "tp": 2}, ["Replicate()", "Shard(dim=0)"]
    dtensor = {
        "placements": placements,
        "kinds": ["replicate", "shard"],
        "mesh": mesh,
        "coordinate": divmod(rank, 2),
    }
    return {"repr": "w", "key": value, "tensor": {"shape": [4], "dtype": "float32", "dtensor": dtensor}}


class ReplicaTableApp(App[None]):
    """A compare table of a DTensor whose rank 3 differs from its replica."""

    def compose(self) -> ComposeResult:
        """One table."""
        table = CompareTable()
        answers: dict[int, Answer] = {rank: replica(rank, "ab"[rank % 2]) for rank in range(3)}
        table.title, table.comparison = ":compare w", compare({**answers, 3: replica(3, "c")})
        yield table


async def test_compare_table_names_the_rank_that_differs_from_its_replica() -> None:
    app = ReplicaTableApp()
    async with app.run_test(size=(100, 12)) as pilot:
        table = app.query_one(CompareTable)
        assert "replicas differ along dp" in str(table.query_one(".title").render())
        notes = table.query_one(".notes")
        assert notes.display and str(notes.render()) == (
            "rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)"
        )
        table.comparison = compare(ANSWERS)
        await pilot.pause()
        assert not notes.display


async def test_watch_panel_follows_lockstep_steps() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "unseeded.py", nproc=4)))
    async with app.run_test(size=(170, 45)) as pilot:
        await until(pilot, lambda: all_paused(app))
        panel = app.watch_panel
        assert panel.has_class("-empty")
        await pilot.press("f2", *":compare loss", "enter")
        await until(pilot, lambda: len(app.query(CompareTable)) == 1)
        assert not panel.has_class("-empty")
        await pilot.press(*":watch counter * 10", "enter")
        await until(pilot, lambda: len(app.query(CompareTable)) == 2)
        await pilot.press("f10")

        def watched() -> str:
            tables = [t for t in app.query(CompareTable) if t.title == "watch counter * 10"]
            return str(tables[0].query_one(".rows").render()) if tables else ""

        await until(pilot, lambda: watched() == "  ranks 0-3 │ 10")
        await pilot.press(*":unwatch all", "enter")
        await until(pilot, lambda: len(app.query(CompareTable)) == 1)
        app.session.kill_now()


async def test_stacks_tree_in_the_app_makes_a_group_of_a_branch() -> None:
    app = DdptuiApp(Session(spec(SCRIPTS / "diverge.py", nproc=3)))
    async with app.run_test(size=(170, 45)) as pilot:
        await until(pilot, lambda: all_paused(app))
        await pilot.press("f2", *":stacks", "enter")
        await until(pilot, lambda: len(app.query(StackTree)) == 1)
        tree = app.query_one(StackTree)
        assert app.focused is app.command_bar.input  # typing goes on where it was
        tree.focus()
        assert "2 different stacks" in str(tree.root.label)
        await pilot.press("down", "g")
        await until(pilot, lambda: "branch" in app.session.groups)
        assert app.session.groups["branch"] == frozenset({1, 2})
        app.session.kill_now()
