"""The table of `:` commands: each defined once with its usage and help, found by name or alias.

Each family of commands (`FAMILIES`) registers here; `registry` imports them all and runs a
command line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result

Handler = Callable[[Context, str], Awaitable[Result]]


@dataclass(frozen=True)
class Command:
    """A `:` command: its name, aliases, one-line usage and help, and its handler."""

    name: str
    aliases: tuple[str, ...]
    usage: str
    help: str
    run: Handler


WIDTH = 120
"""Characters of a table line at most (values are cut, with a marker)."""
COMMANDS: dict[str, Command] = {}
"""Every command by name and by alias."""


def command(name: str, *aliases: str, usage: str, help: str) -> Callable[[Handler], Handler]:
    """Register a handler as the command `name`."""

    def register(handler: Handler) -> Handler:
        entry = Command(name, aliases, usage, help, handler)
        for key in (name, *aliases):
            COMMANDS[key] = entry
        return handler

    return register


FAMILIES = ("selecting", "job", "sending", "breaking", "hunting", "inspecting")
"""The modules that register commands, in the order `:help` lists them."""


def commands() -> list[Command]:
    """Every command once, family by family, each family in definition order."""
    once = list(dict.fromkeys(COMMANDS.values()))
    return sorted(once, key=lambda entry: FAMILIES.index(entry.run.__module__.rpartition(".")[2]))
