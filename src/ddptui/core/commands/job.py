"""`:` commands about the job as a whole: `:state`, `:mesh`, `:help`, `:detach`, `:quit`."""

from __future__ import annotations

from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import command, commands
from ddptui.core.model.targets import name_ranks
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import answered
from ddptui.rank.asks import Timeouts


@command("state", "status", usage=":state", help="every rank's state, mesh coordinates, host and pid")
async def _state(ctx: Context, arg: str) -> Result:
    """One line per rank, the waiting ones placed afresh."""
    session = ctx.session
    await session.replace_waiting()
    topology = await session.topology_reader.read()
    lines = []
    for rank in session.ranks:
        who = rank.identity
        where = f"  [local rank {who.local_rank} on {who.host}, pid {who.pid}]" if who is not None else ""
        lines.append(f"{topology.label(rank.index)}: {rank.state.describe()}{where}")
    return Result((*lines, *await suspended_timeouts(session)))


@command("mesh", usage=":mesh", help="the device mesh (each rank's coordinates) and every process group")
async def _mesh(ctx: Context, arg: str) -> Result:
    """What the ranks say of their meshes and groups, asked afresh."""
    return Result(tuple((await ctx.session.topology_reader.read()).describe()))


async def suspended_timeouts(session: Session) -> list[str]:
    """The job's own process-group timeouts that ddptui raised so that pausing cannot kill the job."""
    linked = [rank.index for rank in session.live(range(len(session.ranks))) if rank.transport.linked]
    seen: dict[str, float] = {}
    answers = await session.ask(Timeouts(), linked, 2.0)
    for timeouts in answered(answers).values():
        seen.update(timeouts)
    paused = {rank.index for rank in session.ranks if rank.state.at_prompt}
    who = f"{name_ranks(paused)} {'is' if len(paused) == 1 else 'are'}"
    while_ = f" while {who} paused" if paused else ""
    groups: dict[float, list[str]] = {}
    for name, seconds in sorted(seen.items(), key=lambda item: (len(item[0]), item[0])):
        groups.setdefault(seconds, []).append(session.topology.group_name(name))
    return [
        f"user timeout {seconds:g} s of {'process group' if len(names) == 1 else 'process groups'} "
        f"{', '.join(names)} suspended{while_} (--pg-timeout applies)"
        for seconds, names in groups.items()
    ]


@command("help", "h", "?", usage=":help", help="this list")
async def _help(ctx: Context, arg: str) -> Result:
    """Every command with its usage and help."""
    width = max(len(entry.usage) for entry in commands())
    lines = [f"{entry.usage:<{width}}  {entry.help}" for entry in commands()]
    lines.append(f"{'@0,2 CMD':<{width}}  send a pdb command to ranks 0 and 2 only")
    lines.append(f"{'q | exit':<{width}}  same as :quit")
    return Result(tuple(lines))


NOT_DETACHED = (
    "this session runs in the process of its terminal (--no-session, --batch): it cannot be left running"
)


@command("detach", usage=":detach", help="leave a detached session running (as Ctrl+D): ddptui join returns")
async def _detach(ctx: Context, arg: str) -> Result:
    """Ask the front end to leave the session as it is (a detached session's only)."""
    if ctx.leave is None:
        return Result((NOT_DETACHED,), error=True)
    return Result(detach=True)


@command("quit", "q", "exit", usage=":quit", help="end every rank and leave")
async def _quit(ctx: Context, arg: str) -> Result:
    """Ask the front end to end the session."""
    return Result(quit=True)
