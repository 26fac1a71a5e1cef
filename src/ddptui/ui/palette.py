"""The command palette's entries (Ctrl+P): every key's action, from `actions.ACTIONS`."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator

from textual.app import SystemCommand

from ddptui.ui.actions import ACTIONS

RunAction = Callable[[str], Awaitable[object]]
"""The app's `run_action`, which parses `step('n')` as a key press would."""


def key_commands(run_action: RunAction) -> Iterator[SystemCommand]:
    """The palette's entry for every key; choosing one runs its action through `run_action`."""
    for action in ACTIONS:
        yield SystemCommand(action.palette_title, action.help, functools.partial(run_action, action.action))


def commands(run_action: RunAction) -> Iterator[SystemCommand]:
    """Every entry of the palette: the keys' actions."""
    yield from key_commands(run_action)
