"""The command palette's entries for the app's keys: every binding there too, found by name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from textual.app import SystemCommand

if TYPE_CHECKING:
    from ddptui.ui.app import DdptuiApp


def binding_commands(app: DdptuiApp) -> Iterator[SystemCommand]:
    """The palette's commands for the app's bindings (after Textual's own)."""
    yield SystemCommand(
        "Broadcast/typing (F2)",
        "Type into the command line or the focused pane",
        app.action_toggle_broadcast,
    )
    for key, command, name in (
        ("F10", "n", "Next"),
        ("F11", "s", "Step"),
        ("Shift+F11", "r", "Return"),
        ("F5", "c", "Continue"),
    ):
        yield SystemCommand(
            f"{name} ({key})",
            f"Broadcast `{command}` to the target ranks",
            lambda c=command: app.action_step(c),
        )
    yield SystemCommand(
        "Skip this breakpoint() (F8)",
        "The breakpoint() where the target ranks stand stops no more (:skip)",
        app.action_skip,
    )
    yield SystemCommand(
        "Interrupt (F12)",
        "The target ranks that run stop at the line each runs (:interrupt)",
        app.action_interrupt,
    )
    yield SystemCommand(
        "Previous rank (F3)", "Type into the previous rank", lambda: app.action_focus_rank(-1)
    )
    yield SystemCommand("Next rank (F4)", "Type into the next rank", lambda: app.action_focus_rank(1))
