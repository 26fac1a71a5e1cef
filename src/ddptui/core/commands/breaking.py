"""`:` commands about breakpoints: `:breaks` lists pdb's per rank, `:skip` makes one stop no more.

pdb's own `b` typed at the broadcast line goes to every target rank like any pdb command; these
commands ask the ranks what they have (`Breaks`) and change which breakpoints stop (`Skip`).
"""

from __future__ import annotations

from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import COMMANDS, command
from ddptui.core.model.targets import name_ranks
from ddptui.core.transport.interface import RequestError, answered
from ddptui.rank.asks import Breakpoint, Breaks, Skip
from ddptui.rank.protocol import Frame

BREAKS_TIMEOUT = 5.0
"""Seconds a rank has to list its breakpoints."""


def describe(bp: Breakpoint) -> str:
    """One breakpoint as `:breaks` says it: `1 train.py:19 if loss.isnan().any() (hits 2)`."""
    words = [str(bp.number), str(Frame(bp.file, bp.line))]
    if bp.condition:
        words.append(f"if {bp.condition}")
    if not bp.enabled:
        words.append("(disabled)")
    if bp.temporary:
        words.append("(once)")
    words.append(f"(hits {bp.hits})")
    return " ".join(words)


@command(
    "breaks",
    usage=":breaks",
    help="list pdb's breakpoints (b, --break) of the target ranks, ranks with the same ones together",
)
async def _breaks(ctx: Context, arg: str) -> Result:
    """Each target rank's breakpoints; ranks whose lists are the same share their lines."""
    if arg:
        return Result((f"usage: {COMMANDS['breaks'].usage}",), error=True)
    session = ctx.session
    ranks = [rank.index for rank in session.live()]
    if not ranks:
        return Result(("no live target rank to ask",), error=True)
    groups: dict[tuple[str, ...], list[int]] = {}
    for index, reply in sorted((await session.ask(Breaks(), ranks, BREAKS_TIMEOUT)).items()):
        if isinstance(reply, RequestError):
            said: tuple[str, ...] = (f"no answer: {reply}",)
        else:
            said = tuple(describe(bp) for bp in reply) or ("no breakpoints",)
        groups.setdefault(said, []).append(index)
    return Result(
        tuple(f"[{name_ranks(members)}] {line}" for said, members in groups.items() for line in said)
    )


def parse_site(arg: str) -> tuple[str, int] | None:
    """`FILE:LINE` as a site, or None."""
    file, colon, line = arg.rpartition(":")
    return (file.strip(), int(line)) if colon and file.strip() and line.strip().isdigit() else None


@command(
    "skip",
    usage=":skip [FILE:LINE|all|none]",
    help="the breakpoint the target ranks last stopped at (or the one at FILE:LINE) stops no more, "
    "on every rank (all: no breakpoint() stops; none: undo)",
)
async def _skip(ctx: Context, arg: str) -> Result:
    """Make breakpoints stop no more: a `breakpoint()` call by its site, a `b` one by disabling it."""
    session = ctx.session
    everyone = [rank.index for rank in session.live(range(len(session.ranks)))]
    if arg in ("all", "none"):
        await session.ask(Skip(all=True) if arg == "all" else Skip(none=True), everyone)
        if arg == "all":
            return Result(("no breakpoint() stops any more, on any rank (:skip none undoes)",))
        return Result(("every breakpoint stops again",))
    site = parse_site(arg) if arg else None
    if arg and site is None:
        return Result((f"usage: {COMMANDS['skip'].usage}",), error=True)
    if site is not None:
        sites = {site}
    else:
        answers = await session.ask(Skip(), [rank.index for rank in session.live()])
        sites = {skipping.here for skipping in answered(answers).values() if skipping.here}
        if not sites:
            return Result(("no target rank has stopped at a breakpoint yet",), error=True)
    await session.ask(Skip(sites=tuple(sorted(sites))), everyone)
    where = ", ".join(sorted(str(Frame(file, line)) for file, line in sites))
    return Result((f"breakpoint at {where} stops no more, on any rank (:skip none undoes)",))
