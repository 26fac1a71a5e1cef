"""Every `:` command, defined once with its help, returning a result both front ends show.

Batch mode prints a `Result` as `ddptui: ...` lines; the app writes the same lines to its command
log. `q`, `quit` and `exit` typed bare mean `:quit` in both.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ddptui.core.session import Session
from ddptui.core.targets import TargetError
from ddptui.rank.protocol import Frame, Reply


@dataclass(frozen=True)
class Result:
    """What a command says: lines of plain text, whether it failed, whether to quit."""

    lines: tuple[str, ...] = ()
    error: bool = False
    quit: bool = False


Handler = Callable[[Session, str], Awaitable[Result]]


@dataclass(frozen=True)
class Command:
    """A `:` command: its name, aliases, one-line usage and help, and its handler."""

    name: str
    aliases: tuple[str, ...]
    usage: str
    help: str
    run: Handler


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


def commands() -> list[Command]:
    """Every command once, in definition order."""
    return list(dict.fromkeys(COMMANDS.values()))


async def run(session: Session, text: str) -> Result:
    """Run one command line (without its `:`)."""
    name, _, arg = text.strip().partition(" ")
    entry = COMMANDS.get(name)
    if entry is None:
        return Result((f"unknown command :{name} (:help lists the commands)",), error=True)
    try:
        return await entry.run(session, arg.strip())
    except TargetError as exc:
        return Result((str(exc),), error=True)


@command("ranks", "r", usage=":ranks [0,2-3|all]", help="show or set the ranks a command goes to")
async def _ranks(session: Session, arg: str) -> Result:
    """Show or set the default targets."""
    return Result((session.set_targets(arg),))


@command("state", "status", usage=":state", help="every rank's state, host and pid")
async def _state(session: Session, arg: str) -> Result:
    """One line per rank."""
    lines = []
    for rank in session.ranks:
        who = rank.identity
        where = f"  [{who.host} pid {who.pid}]" if who is not None else ""
        lines.append(f"rank {rank.index}: {rank.state.describe()}{where}")
    return Result(tuple(lines))


@command("help", "h", "?", usage=":help", help="this list")
async def _help(session: Session, arg: str) -> Result:
    """Every command with its usage and help."""
    width = max(len(entry.usage) for entry in commands())
    lines = [f"{entry.usage:<{width}}  {entry.help}" for entry in commands()]
    lines.append(f"{'@0,2 CMD':<{width}}  send a pdb command to ranks 0 and 2 only")
    lines.append(f"{'q | exit':<{width}}  same as :quit")
    return Result(tuple(lines))


@command(
    "skip",
    usage=":skip [all|none]",
    help="the breakpoint() where the target ranks stand stops no more, on every rank "
    "(all: no breakpoint() stops; none: undo)",
)
async def _skip(session: Session, arg: str) -> Result:
    """Stop hard-coded breakpoints from stopping (pdb's own `b` breakpoints are untouched)."""
    everyone = [rank.index for rank in session.live(range(len(session.ranks)))]
    if arg in ("all", "none"):
        await session.ask("skip", {"all": True} if arg == "all" else {"none": True}, everyone)
        if arg == "all":
            return Result(("no breakpoint() stops any more, on any rank (:skip none undoes)",))
        return Result(("every breakpoint() stops again",))
    if arg:
        return Result((f"usage: {COMMANDS['skip'].usage}",), error=True)
    paused = [rank.index for rank in session.live() if rank.state.at_prompt]
    answers = await session.ask("skip", {}, paused)
    sites = {
        tuple(a.value["here"]) for a in answers.values() if isinstance(a, Reply) and a.ok and a.value["here"]
    }
    if not sites:
        return Result(("no target rank stands at a breakpoint() call",), error=True)
    await session.ask("skip", {"sites": [list(site) for site in sites]}, everyone)
    where = ", ".join(sorted(str(Frame(file, line)) for file, line in sites))
    return Result((f"breakpoint at {where} stops no more, on any rank (:skip none undoes)",))


@command("quit", "q", "exit", usage=":quit", help="end every rank and leave")
async def _quit(session: Session, arg: str) -> Result:
    """Ask the front end to end the session."""
    return Result(quit=True)
