"""`Result`: what a `:` command says, for both front ends (batch prints it, the app logs and draws it)."""

from __future__ import annotations

from dataclasses import dataclass

from ddptui.core.diagnosis.compare import Comparison
from ddptui.core.diagnosis.stack_tree import Node


@dataclass(frozen=True)
class Result:
    """What a command says: lines of plain text, whether it failed, whether to quit."""

    lines: tuple[str, ...] = ()
    error: bool = False
    quit: bool = False
    detach: bool = False
    """Leave the session running and this front end (`:detach`)."""
    sent: str = ""
    """The pdb command the command broadcast, if any (a transcript drops pdb's echo of it)."""
    tables: tuple[tuple[str, Comparison], ...] = ()
    """Cross-rank tables behind the lines (`:compare EXPR`, `watch EXPR`), for front ends that draw them."""
    stack: Node | None = None
    """The merged stack tree behind `:stacks`' lines, for front ends that draw it."""
