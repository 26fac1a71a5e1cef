"""`StackTree`: the merged stacks of `:stacks` as a Textual tree; `g` makes a rank group of a branch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ddptui.core.diagnosis.stack_tree import Node, Stop
from ddptui.core.model.targets import name_ranks

Branch = Node | Stop
"""What a line of the tree stands for: a frame (or folded frames) of the merged stacks, or a stop."""


class StackTree(Tree[Branch]):
    """Every rank's stack merged into one tree (see `ddptui.core.diagnosis.stack_tree`), odd branches marked.

    Labels are built as plain `Text`, never parsed as markup: function and file names come from
    the ranks. The whole tree starts expanded; `g` asks for a rank group of the branch under the
    cursor (`StackTree.GroupRequested`).
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("g", "group", "Rank group from branch"),
    ]

    DEFAULT_CSS = """
    StackTree {
        & > .stack-tree--odd { color: $warning; text-style: bold; }
        & > .stack-tree--ranks { color: $text-muted; }
        & > .stack-tree--collective { color: $accent; }
    }
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "stack-tree--odd",
        "stack-tree--ranks",
        "stack-tree--collective",
    }
    """
    | Class | Description |
    | :- | :- |
    | `stack-tree--odd` | An odd branch (taken by a minority of its ranks) and everything below it. |
    | `stack-tree--ranks` | The `[ranks 0-2]` part of a label. |
    | `stack-tree--collective` | The collective a leaf's ranks wait in. |
    """

    @dataclass
    class GroupRequested(Message):
        """The user asked for a rank group of the ranks that take a branch."""

        ranks: frozenset[int]
        """The branch's ranks."""
        stack_tree: StackTree | None = field(default=None, repr=False)
        """The tree asked from."""

        @property
        def control(self) -> StackTree | None:
            """The tree asked from (alias of `stack_tree`)."""
            return self.stack_tree

    def __init__(
        self,
        node: Node | None = None,
        *,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
        disabled: bool = False,
    ) -> None:
        super().__init__(Text("no stacks yet"), name=name, id=id, classes=classes, disabled=disabled)
        self._in_odd: set[int] = set()
        """Ids of tree nodes inside an odd branch."""
        if node is not None:
            self.show(node)

    # -- public API -------------------------------------------------------------------------
    def show(self, node: Node) -> None:
        """Replace what the tree shows with `node` (a `merge` result), fully expanded."""
        self.clear()
        self._in_odd.clear()
        self.root.set_label(Text(node.label()))
        self.root.data = node
        self._add_below(self.root, node, False)
        self.root.expand_all()

    @property
    def selected_ranks(self) -> frozenset[int]:
        """The ranks of the branch under the cursor (none without one)."""
        line = self.cursor_node
        return frozenset() if line is None or line.data is None else line.data.ranks

    def action_group(self) -> None:
        """Post `GroupRequested` for the branch under the cursor."""
        ranks = self.selected_ranks
        if ranks:
            self.post_message(self.GroupRequested(ranks, self))

    # -- building and drawing ---------------------------------------------------------------
    def _add_below(self, line: TreeNode[Branch], node: Node, odd: bool) -> None:
        """Add a line for every branch of `node` under `line`, and their own below them."""
        for branch in node.branches():
            label = Text("".join(text for text, _ in parts(branch)))
            if isinstance(branch, Node) and branch.branches():
                child = line.add(label, data=branch, expand=True)
                self._add_below(child, branch, odd or branch.odd)
            else:
                child = line.add_leaf(label, data=branch)
            if odd or branch.odd:
                self._in_odd.add(child.id)

    def render_label(self, node: TreeNode[Branch], base_style: Style, style: Style) -> Text:
        """The label with its parts in their component styles, an odd branch in its own."""
        text = super().render_label(node, base_style, style)
        if node.data is None or node.is_root:
            return text
        pieces = parts(node.data)
        at = len(text) - sum(len(piece) for piece, _ in pieces)
        if node.id in self._in_odd:
            text.stylize(self.get_component_rich_style("stack-tree--odd", partial=True), at)
        for piece, component in pieces:
            if component:
                text.stylize(self.get_component_rich_style(component, partial=True), at, at + len(piece))
            at += len(piece)
        return text


def parts(branch: Branch) -> list[tuple[str, str]]:
    """A branch's label in pieces, each with its component class ("" for none); joined, the label."""
    odd = [("≠ ", "stack-tree--odd")] if branch.odd else []
    ranks = (f" [{name_ranks(branch.ranks)}]", "stack-tree--ranks")
    if isinstance(branch, Stop):
        what = (branch.collective, "stack-tree--collective") if branch.collective else ("stops here", "")
        return [*odd, what, ranks]
    stop = branch.inline_stop
    tail = [(f" · {stop.collective}", "stack-tree--collective")] if stop and stop.collective else []
    return [*odd, (branch.what(), ""), ranks, *tail]
