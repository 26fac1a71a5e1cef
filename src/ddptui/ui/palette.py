"""The command palette's entries (Ctrl+P): every key's action, then every `:` command.

The keys come from `actions.ACTIONS`, the `:` commands from the registry, so the palette lists
whatever either gains. A `:` command that needs an argument is begun on the command line, focused,
for the user to finish (`:until ` waits for its expression); one that needs none runs at once.
Textual reads an entry's help as markup: each is made `literal`, so a usage's `[EXPR]` shows as written.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterator

from textual.app import SystemCommand

from ddptui.core.commands import registry
from ddptui.ui.actions import ACTIONS

RunAction = Callable[[str], Awaitable[object]]
"""The app's `run_action`, which parses `step('n')` as a key press would."""
Begin = Callable[[str], object]
"""Put text on the command line, focused, ready for more (`CommandBar.begin`)."""


def literal(text: str) -> str:
    """`text` as the palette's markup for it: the palette reads an entry's help as markup, where
    `[EXPR]` would be a tag and vanish, and `\\[` is a bracket (textual's `escape` leaves `[EXPR]`)."""
    return text.replace("[", "\\[")


def needs_argument(name: str, usage: str) -> bool:
    """Whether a command's usage (`:until [--max-stops N] EXPR`) names an argument outside
    brackets: one the command cannot run without."""
    depth, required = 0, []
    for char in usage.removeprefix(f":{name}"):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif depth == 0:
            required.append(char)
    return bool("".join(required).strip())


def key_commands(run_action: RunAction) -> Iterator[SystemCommand]:
    """The palette's entry for every key; choosing one runs its action through `run_action`."""
    for action in ACTIONS:
        yield SystemCommand(
            action.palette_title, literal(action.help), functools.partial(run_action, action.action)
        )


def colon_commands(run_action: RunAction, begin: Begin) -> Iterator[SystemCommand]:
    """The palette's entry for every `:` command, titled `:NAME`, its usage and help under it.

    Choosing one that needs an argument puts `:NAME ` on the command line (`begin`); choosing one
    that needs none runs it, as its key would (`command('NAME')`)."""
    for entry in registry.commands():
        chosen: Callable[[], object]
        if needs_argument(entry.name, entry.usage):
            chosen = functools.partial(begin, f":{entry.name} ")
        else:
            chosen = functools.partial(run_action, f"command({entry.name!r})")
        yield SystemCommand(f":{entry.name}", literal(f"{entry.usage} · {entry.help}"), chosen)


def commands(run_action: RunAction, begin: Begin) -> Iterator[SystemCommand]:
    """Every entry of the palette: the keys' actions, then the `:` commands."""
    yield from key_commands(run_action)
    yield from colon_commands(run_action, begin)
