"""`:` commands that hunt for a stop: `:until EXPR` (EXPR true on a rank) and `:until-diverge EXPR`
(EXPR no longer equal across the ranks that must agree). Both continue every target rank in
lockstep, stop after stop (`hunt.Hunt`), and say where they stopped."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ddptui.core.commands.context import Context
from ddptui.core.commands.hunt import Check, Hunt
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import COMMANDS, WIDTH, command
from ddptui.core.diagnosis.compare import Answer, compare
from ddptui.core.model.targets import name_ranks


@dataclass(frozen=True)
class Options:
    """An `:until` line read: its expression and options."""

    expr: str
    max_stops: int
    tol: float | None = None


class OptionError(ValueError):
    """An `:until` line that does not read; the message is one line for the user."""


def read_options(name: str, arg: str, default_stops: int, tol: bool = False) -> Options:
    """`[--max-stops N] [--tol X] EXPR` (`--tol` only where `tol`); raise OptionError."""
    max_stops, tolerance, rest = default_stops, None, arg.strip()
    while rest.startswith("--"):
        option, value, rest = [*rest.split(None, 2), "", ""][:3]
        if option == "--max-stops":
            if not value.isdigit() or int(value) < 1:
                raise OptionError(f"--max-stops needs a whole number of stops above 0, not {value!r}")
            max_stops = int(value)
        elif option == "--tol" and tol:
            try:
                tolerance = float(value)
            except ValueError:
                raise OptionError(f"--tol needs a number, not {value!r}") from None
        else:
            raise OptionError(f"unknown option {option} (usage: {COMMANDS[name].usage})")
    if not rest:
        raise OptionError(f"usage: {COMMANDS[name].usage}")
    try:
        compile(rest, "<expr>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise OptionError(f"not run: {rest} is not a Python expression ({reason})") from None
    return Options(rest, max_stops, tolerance)


async def _hunt(ctx: Context, name: str, arg: str, diverge: bool) -> Result:
    """Read the line, then hunt with `:until`'s or `:until-diverge`'s check."""
    try:
        options = read_options(name, arg, ctx.max_stops, tol=diverge)
    except OptionError as exc:
        return Result((str(exc),), error=True)
    title = f":{name} {options.expr}"
    check = diverge_check(title, options.expr, options.tol) if diverge else truth_check(options.expr)
    return await Hunt(title, options.expr, check, options.max_stops, truth=not diverge).run(ctx)


@command(
    "until",
    usage=":until [--max-stops N] EXPR",
    help="continue the target ranks in lockstep, stop after stop, until EXPR is true on at least one",
)
async def _until(ctx: Context, arg: str) -> Result:
    """Run until EXPR is true somewhere; name the rank(s) and the stop."""
    return await _hunt(ctx, "until", arg, diverge=False)


@command(
    "until-diverge",
    usage=":until-diverge [--max-stops N] [--tol X] EXPR",
    help="continue the target ranks in lockstep until EXPR differs across the ranks that must agree "
    "(a DTensor: its replicas)",
)
async def _until_diverge(ctx: Context, arg: str) -> Result:
    """Run until EXPR differs across replicas; name the stop and the groups."""
    return await _hunt(ctx, "until-diverge", arg, diverge=True)


def truth_check(expr: str) -> Check:
    """`:until`'s check: EXPR true on at least one rank (its own `bool()` said True)."""

    def check(answers: Mapping[int, Answer], stop: int, where: str) -> Result | None:
        truths = {rank: _truth(answer) for rank, answer in answers.items()}
        true = [rank for rank, truth in truths.items() if truth is True]
        if not true:
            return None
        false = [rank for rank, truth in truths.items() if truth is False]
        raised = [rank for rank, truth in truths.items() if truth is None]
        when = f"stop {stop}" if stop else "stop 0: before any continue"
        text = f"{expr} first true on {name_ranks(true)}{f' at {where}' if where else ''} ({when})"
        text += f"; {name_ranks(false)} false" if false else ""
        text += f"; {name_ranks(raised)} raised" if raised else ""
        return Result((text,))

    return check


def _truth(answer: Answer) -> bool | None:
    """What a rank's `bool(EXPR)` said: True, False, or None where it raised (or gave no answer)."""
    if isinstance(answer, str):
        return None
    return answer.get("repr") == "True"


def diverge_check(title: str, expr: str, tol: float | None) -> Check:
    """`:until-diverge`'s check: the ranks that answered no longer agree, as `:compare` groups
    them (a DTensor: along its replicated mesh dims; anything else: all of them). Ranks where
    EXPR raised are left out of the verdict (and said at the end)."""

    def check(answers: Mapping[int, Answer], stop: int, where: str) -> Result | None:
        values = {rank: answer for rank, answer in answers.items() if isinstance(answer, dict)}
        if not any(row.odd for row in compare(values, tol).rows):
            return None
        table = compare(answers, tol)
        groups = "; ".join(f"{name_ranks(row.ranks)} = {row.text}" for row in table.rows if not row.error)
        within = f" (tol {tol:g})" if tol is not None else ""
        place = ", ".join(part for part in ("before any continue" if not stop else "", where) if part)
        text = f"at stop {stop}{f' ({place})' if place else ''}, {expr} differs{within}: {groups}"
        return Result((text, *table.lines(WIDTH)), tables=((title, table),))

    return check
