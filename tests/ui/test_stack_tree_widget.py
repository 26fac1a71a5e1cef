"""StackTree in a tiny app fed a hand-made tree: lines, odd styling, plain-text labels, `g`, snapshot."""

from __future__ import annotations

from collections.abc import Callable

from conftest import until
from rich.style import Style
from textual.app import App, ComposeResult
from textual.pilot import Pilot

from ddptui.core.diagnosis.collective_records import Record
from ddptui.core.diagnosis.stack_tree import Node, merge, placeholder
from ddptui.rank.protocol import Frame
from ddptui.ui.stack_tree import StackTree

TORCH = "/venv/lib/python3.11/site-packages/torch/"
MODULE = Frame("train.py", 20, "<module>")
ALL_REDUCE = [
    MODULE,
    Frame("train.py", 10, "main"),
    Frame(TORCH + "nn/modules/module.py", 1775, "_wrapped_call_impl"),
    Frame(TORCH + "nn/modules/module.py", 1786, "_call_impl"),
    Frame("model.py", 7, "forward"),
    Frame(TORCH + "distributed/c10d_logger.py", 81, "wrapper"),
    Frame(TORCH + "distributed/distributed_c10d.py", 2900, "all_reduce"),
]
PENDING = Record(5, "all_reduce", shapes=((3,),), dtypes=("float32",), state="issued")


def hang() -> Node:
    """Ranks 0-2 wait in all_reduce; rank 3 sleeps elsewhere, rank 4 has exited."""
    sleep = [MODULE, Frame("train.py", 11, "main")]
    stacks = {0: ALL_REDUCE, 1: ALL_REDUCE, 2: ALL_REDUCE, 3: sleep, 4: [placeholder("exited 0")]}
    return merge(stacks, {0: PENDING, 1: PENDING, 2: PENDING})


class TreeApp(App[None]):
    """One StackTree, recording the groups it asks for."""

    def __init__(self, node: Node) -> None:
        super().__init__()
        self.node = node
        self.groups: list[frozenset[int]] = []

    def compose(self) -> ComposeResult:
        yield StackTree(self.node)

    def on_stack_tree_group_requested(self, message: StackTree.GroupRequested) -> None:
        assert message.control is self.query_one(StackTree)
        self.groups.append(message.ranks)


def rows(tree: StackTree) -> list[str]:
    """The text of every row the tree draws, without trailing blanks."""
    return [tree.render_line(y).text.rstrip() for y in range(tree.size.height)]


def style_at(tree: StackTree, y: int, text: str) -> Style:
    """The style of the first cell of `text` on row `y`."""
    x = 0
    for segment in tree.render_line(y):
        if text in segment.text:
            return segment.style or Style()
        x += len(segment.text)
    raise AssertionError(f"{text!r} not on row {y}")


async def test_the_tree_shows_every_branch_expanded_with_the_odd_ones_marked() -> None:
    app = TreeApp(hang())
    async with app.run_test(size=(140, 16)) as pilot:
        tree = app.query_one(StackTree)
        await until(pilot, lambda: "ranks 0-4" in rows(tree)[0], timeout=5)
        text = rows(tree)
        assert "ranks 0-4: 3 different stacks" in text[0]
        assert any("… 2 library frames [ranks 0-2]" in row for row in text)
        leaf = next(
            y
            for y, row in enumerate(text)
            if "all_reduce (torch/distributed/distributed_c10d.py:2900)" in row
        )
        assert text[leaf].endswith("[ranks 0-2] · #5 all_reduce [3] float32")
        odd = next(y for y, row in enumerate(text) if "≠ main (train.py:11) [rank 3]" in row)
        assert any("≠ <exited 0> [rank 4]" in row for row in text)
        warning = tree.get_component_rich_style("stack-tree--odd", partial=True).color
        assert warning is not None and style_at(tree, odd, "main").color == warning
        assert style_at(tree, leaf, "all_reduce (").color != warning


async def test_g_asks_for_a_group_of_the_branch_under_the_cursor() -> None:
    app = TreeApp(hang())
    async with app.run_test(size=(110, 16)) as pilot:
        tree = app.query_one(StackTree)
        tree.focus()
        await pilot.press("g")  # the root: every rank
        await until(pilot, lambda: app.groups == [frozenset(range(5))], timeout=5)
        odd = next(y for y, row in enumerate(rows(tree)) if "main (train.py:11)" in row)
        tree.cursor_line = odd
        await pilot.press("g")
        await until(pilot, lambda: app.groups[-1:] == [frozenset({3})], timeout=5)
        assert tree.selected_ranks == {3}


async def test_labels_are_plain_text_never_markup() -> None:
    evil = [Frame("[bold]x[/bold].py", 1, "[red]f[/red]"), Frame("y.py", 2, "[link=http://e]g")]
    app = TreeApp(merge({0: evil}))
    async with app.run_test(size=(80, 6)) as pilot:
        tree = app.query_one(StackTree)
        await until(pilot, lambda: "[red]f[/red] ([bold]x[/bold].py:1) [rank 0]" in rows(tree)[1], timeout=5)
        assert "[link=http://e]g (y.py:2) [rank 0]" in rows(tree)[2]


async def test_show_replaces_the_tree() -> None:
    app = TreeApp(hang())
    async with app.run_test(size=(80, 8)) as pilot:
        tree = app.query_one(StackTree)
        tree.show(merge({0: [MODULE], 1: [MODULE]}))
        await until(pilot, lambda: "ranks 0-1: one stack" in rows(tree)[0], timeout=5)
        assert "<module> (train.py:20) [ranks 0-1]" in rows(tree)[1] and not rows(tree)[2].strip()


def test_snapshot(snap_compare: Callable[..., bool]) -> None:
    async def settle(pilot: Pilot[None]) -> None:
        tree = pilot.app.query_one(StackTree)
        tree.focus()
        await until(pilot, lambda: any("train.py:11" in row for row in rows(tree)), timeout=5)
        tree.cursor_line = next(y for y, row in enumerate(rows(tree)) if "train.py:11" in row)
        await pilot.pause(0.1)

    assert snap_compare(TreeApp(hang()), terminal_size=(120, 14), run_before=settle)
