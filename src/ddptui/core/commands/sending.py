"""`:` commands that send something to the ranks: pdb commands in lockstep behind the divergence
guard, `:interrupt`, `:until-collective`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ddptui.core.commands.context import Context
from ddptui.core.commands.inspecting import watch_result, watch_tables
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import command
from ddptui.core.commands.until import release, until_collective
from ddptui.core.model.state import Phase
from ddptui.core.model.targets import Line, by_words, name_ranks
from ddptui.core.session.lockstep import Broadcast
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError
from ddptui.rank.asks import Interrupt

TERMINAL_LINE = 4095
"""Longest line, in bytes, a terminal hands over whole to a program that reads plain lines
(Linux's n_tty buffer less the newline). The ranks ddptui starts read the commands it sends
that way (`LaunchSpec.line_editing`): a longer pdb command would arrive cut."""


def guard(session: Session, targets: frozenset[int] | None, override: str) -> Result | None:
    """The divergence guard: why an execution command is held back (ranks paused at different
    places would step into different collectives), or None when it may go."""
    spread = session.lockstep.divergence(targets)
    if not spread:
        return None
    return Result((f"not sent: the ranks stand at different places ({spread}); {override}",), error=True)


RESTARTS = frozenset({"run", "restart"})
NO_RESTART = (
    "not sent: pdb restarts only a program it started itself (python -m pdb); in a rank it raises "
    "pdb.Restart, which ends the rank's program. To start the job over, quit and run ddptui again"
)


def sending_lines(sent: Broadcast) -> tuple[str, ...]:
    """What happened as a broadcast went out: the ranks it was not sent to, the typed lines it
    cleared. Front ends say it right after the command's echo (`send`'s `on_sent`), before the
    ranks' answers, which may come from what the command set off."""
    return (
        *(
            f"{sent.command} not sent to {ranks}, not at a prompt ({why})"
            for ranks, why in by_words(sent.skipped.items())
        ),
        *(
            f"{sent.command} not sent to {ranks}: {why}; !{sent.command} sends anyway"
            for ranks, why in by_words(sent.held.items())
        ),
        *sent.cleared_lines(),
    )


async def send(
    ctx: Context, line: Line, on_sent: Callable[[Broadcast], None] | None = None
) -> tuple[Broadcast | None, Result]:
    """A pdb command to the target ranks in lockstep, behind the divergence guard; then the watches.

    Returns the broadcast (None when nothing was sent) and what to tell the user about it;
    `on_sent` is called as the command goes out (see `Lockstep.broadcast`).
    """
    session = ctx.session
    held = (
        guard(session, line.targets, f"!{line.text} sends anyway")
        if line.executes and not line.force
        else None
    )
    if held is not None:
        return None, held
    if not session.live(line.targets):
        return None, Result(("no live rank to send it to",), error=True)
    if line.text.split()[0] in RESTARTS:
        return None, Result((NO_RESTART,), error=True)
    control = next((c for c in line.text if c < " " or c == "\x7f"), None)
    if control is not None:  # the terminal (or readline) would act on it: ^C, ^Z, ^\\, ^U, tab...
        return None, Result((f"not sent: it holds the control character {control!r}",), error=True)
    size = len(line.text.encode())
    if session.spec.starts_ranks and size > TERMINAL_LINE:
        return None, Result((f"not sent: {size} bytes, a terminal line holds {TERMINAL_LINE}",), error=True)
    if line.force:  # `!n` also runs a collective that :until-collective held back as mismatched
        await release(session, line.targets)
        session.lockstep.unhold(line.targets)  # and resumes a rank whose evaluation still runs
    result = await session.broadcast(line.text, line.targets, on_sent)
    waiting = ((a.rank, a.state.describe()) for a in result.replies if a.state.phase is Phase.WAITING)
    notes = [f"{ranks} {where}" for ranks, where in by_words(waiting)]
    watched = watch_result(await watch_tables(ctx))
    return result, Result((*notes, *watched.lines), tables=watched.tables)


@command(
    "interrupt",
    "int",
    usage=":interrupt",
    help="stop the target ranks that run where they stand (like Ctrl-C): a prompt opens at each one's line",
)
async def _interrupt(ctx: Context, arg: str) -> Result:
    """Ask every running target rank to stop at the line it runs (`requests.interrupt`)."""
    session = ctx.session
    running = [rank for rank in session.live() if not rank.state.at_prompt]
    if not running:
        return Result(("no target rank is running: nothing to interrupt",))
    answers = await session.ask(Interrupt(), [rank.index for rank in running])
    done = {i for i, reply in answers.items() if reply is True}
    lines = [f"interrupted {name_ranks(done)}: each stops at the line it runs"] if done else []
    lines += [
        f"rank {rank.index} is {rank.state.describe()}: it stops once that call returns"
        for rank in running
        if rank.index in done and rank.state.phase is Phase.WAITING
    ]
    for index, reply in answers.items():
        if index not in done:
            why = str(reply) if isinstance(reply, RequestError) else "its prompt is open already"
            lines.append(f"rank {index} not interrupted: {why}")
    return Result(tuple(lines), error=not done)


@command(
    "until-collective",
    "uc",
    usage=":until-collective [!]",
    help="run the target ranks to their next collective; show what each is about to enter, and if they agree",
)
async def _until_collective(ctx: Context, arg: str) -> Result:
    """Run to the next collective and compare it across ranks (behind the divergence guard)."""
    session = ctx.session

    held = guard(session, None, ":until-collective ! runs anyway") if arg != "!" else None
    if held is not None:
        return held
    return dataclasses.replace(await until_collective(session), sent="c")
