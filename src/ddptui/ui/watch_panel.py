"""`WatchPanel`: every `:watch` expression compared across ranks, refreshed after every step."""

from __future__ import annotations

from textual.containers import VerticalScroll

from ddptui.core.diagnosis.compare import Comparison
from ddptui.core.diagnosis.stack_tree import Node
from ddptui.ui.compare_table import CompareTable
from ddptui.ui.stack_tree import StackTree


class WatchPanel(VerticalScroll):
    """One `CompareTable` per watch; hidden while nothing is watched or compared."""

    DEFAULT_CSS = """
    WatchPanel {
        dock: right;
        width: 52;
        border-left: tall $panel-lighten-2;
        padding: 0 1;
    }
    WatchPanel.-empty {
        display: none;
    }
    """

    def __init__(self) -> None:
        super().__init__(id="watch-panel")
        self.compared: tuple[str, Comparison] | None = None
        """The last `:compare` table."""
        self.watched: list[tuple[str, Comparison]] = []
        """The current watches' tables."""

    def on_mount(self) -> None:
        """Start hidden."""
        self.add_class("-empty")

    def show_stack(self, node: Node) -> None:
        """Show `:stacks`' tree on top of the panel (replacing an older one); focus stays put, so
        the command line keeps the keys (a click or Tab reaches the tree)."""
        for old in self.query(StackTree):
            old.remove()
        self.mount(StackTree(node), before=0 if self.children else None)
        self.remove_class("-empty")

    def show(self, tables: tuple[tuple[str, Comparison], ...]) -> None:
        """Take the tables of a command's result: a `:compare` replaces the last one, watch tables
        replace the watches (an empty table means no watches are left)."""
        compares = [table for table in tables if table[0].startswith(":compare")]
        watches = [table for table in tables if table[0].startswith("watch")]
        if not compares and not watches:
            return
        if compares:
            self.compared = compares[-1]
        if watches:
            self.watched = [table for table in watches if table[1].rows]
        shown = ([self.compared] if self.compared else []) + self.watched
        self.remove_children(CompareTable)
        widgets = []
        for title, comparison in shown:
            widget = CompareTable()
            widget.title, widget.comparison = title, comparison
            widgets.append(widget)
        self.mount_all(widgets)
        self.set_class(not widgets and not self.query(StackTree), "-empty")
