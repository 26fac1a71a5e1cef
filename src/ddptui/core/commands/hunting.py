"""`:` commands that hunt for a stop: `:until EXPR` (EXPR true on a rank) and `:until-diverge EXPR`
(EXPR no longer equal across the ranks that must agree). Both continue every target rank in
lockstep, stop after stop (`hunt.Hunt`), and say where they stopped."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from ddptui.core.commands.context import Context
from ddptui.core.commands.hunt import Check, Hunt
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import WIDTH, command
from ddptui.core.commands.words import Options, UsageError, options_then_rest
from ddptui.core.diagnosis.compare import Answer, compare
from ddptui.core.model.targets import name_ranks


@dataclass(frozen=True)
class Hunting:
    """An `:until` line read: its expression and options."""

    expr: str
    max_stops: int
    tol: float | None = None


class OptionError(ValueError):
    """An `:until` line whose EXPR is not Python; the message is one line for the user."""


def _stops(text: str) -> int:
    """A `--max-stops` value: a whole number above 0."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of stops above 0, not {text!r}")
    return int(text)


def _parser(tol: bool) -> Options:
    parser = Options()
    parser.add_argument("--max-stops", type=_stops)
    if tol:
        parser.add_argument("--tol", type=float)
    return parser


UNTIL_OPTIONS, DIVERGE_OPTIONS = _parser(tol=False), _parser(tol=True)


def read_options(name: str, arg: str, default_stops: int, tol: bool = False) -> Hunting:
    """`[--max-stops N] [--tol X] EXPR` (`--tol` only where `tol`); raise UsageError for the
    options, OptionError for an EXPR that is not Python."""
    words, rest = options_then_rest(arg, valued={"--max-stops", "--tol"})
    read = (DIVERGE_OPTIONS if tol else UNTIL_OPTIONS).read(words)
    if not rest:
        raise UsageError("no EXPR")
    try:
        compile(rest, "<expr>", "eval", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        reason = exc.msg if isinstance(exc, SyntaxError) else str(exc)
        raise OptionError(f"not run: {rest} is not a Python expression ({reason})") from None
    return Hunting(rest, read.max_stops or default_stops, getattr(read, "tol", None))


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
