"""`:` commands that look at the paused ranks: `:compare`, `:watch`, `:where`, `:collectives`,
`:ddp-check`, `:stacks`."""

from __future__ import annotations

from collections.abc import Iterable

from ddptui.core.commands.collectives_table import collectives_table
from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result
from ddptui.core.commands.table import WIDTH, command
from ddptui.core.commands.words import Options, UsageError, options_then_rest, split
from ddptui.core.diagnosis.compare import Answer, Comparison, compare
from ddptui.core.diagnosis.ddp_check import ddp_check
from ddptui.core.diagnosis.stack_tree import merged, render
from ddptui.core.model.targets import name_ranks, parse_ranks
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError
from ddptui.rank.asks import Eval

EVAL_TIMEOUT = 5.0
"""Seconds a rank has to evaluate an expression for `:compare` and watches."""


async def evaluate(
    session: Session, expr: str, targets: Iterable[int] | None = None, truth: bool = False
) -> dict[int, Answer]:
    """EXPR evaluated by every targeted live rank: its summary (with `truth`, of the rank's own
    `bool(EXPR)`), or why there is none.

    A rank stops an evaluation at `EVAL_TIMEOUT` where it can; where it cannot, the evaluation
    still runs, and the rank's resume is held until it ends (`Lockstep.hold`): the program must
    not run beside it.
    """
    answers: dict[int, Answer] = {}
    paused = []
    for rank in session.live(targets):
        if rank.state.at_prompt:
            paused.append(rank.index)
        else:
            answers[rank.index] = f"not at a prompt ({rank.state.describe()})"
    asked = {index: session.ranks[index].paused_count for index in paused}
    lockstep = session.lockstep
    for index, reply in (
        await session.ask(Eval(expr, truth=truth, peers=tuple(paused)), paused, EVAL_TIMEOUT)
    ).items():
        if not isinstance(reply, RequestError):
            answers[index] = reply
            lockstep.unhold([index])
        elif not reply.by_rank:
            answers[index] = f"no answer: {reply}"
        elif str(reply).startswith(f"{Eval.STILL_RUNNING} after"):
            lockstep.hold(index, f"its evaluation of {expr} still runs", asked[index])
            answers[index] = f"{reply}; its n, c, ... wait until it ends"
        else:
            answers[index] = text = str(reply)
            if not text.startswith(Eval.STILL_RUNNING):  # an earlier one still runs: still held
                lockstep.unhold([index])
    return dict(sorted(answers.items()))


def overran(answer: Answer) -> bool:
    """True for an answer that took the whole time a rank has: stopped, still running, or none."""
    return isinstance(answer, str) and answer.startswith((Eval.STOPPED, Eval.STILL_RUNNING, "no answer"))


async def comparison(session: Session, expr: str, tol: float | None = None) -> Comparison:
    """`:compare`'s table for one expression over the default targets."""
    return compare(await evaluate(session, expr), tol)


@command(
    "compare",
    "cmp",
    usage=":compare [--tol X] EXPR",
    help="evaluate EXPR on every target rank and group the ranks by equal value",
)
async def _compare(ctx: Context, arg: str) -> Result:
    """One table: ranks grouped by value, odd groups marked, a sparkline for numbers."""
    tol, expr = compare_args(arg)
    table = await comparison(ctx.session, expr, tol)
    ctx.last_compare = table
    return Result(tuple(table.lines(WIDTH)), tables=((f":compare {expr}", table),))


COMPARE_OPTIONS = Options()
COMPARE_OPTIONS.add_argument("--tol", type=float)


def compare_args(arg: str) -> tuple[float | None, str]:
    """`:compare`'s `--tol X` and its EXPR, the rest of the line as typed (UsageError without one)."""
    words, expr = options_then_rest(arg, valued={"--tol"})
    tol: float | None = COMPARE_OPTIONS.read(words).tol
    if not expr:
        raise UsageError("no EXPR")
    return tol, expr


@command("watch", usage=":watch [EXPR]", help="compare EXPR across ranks after every step (no EXPR: list)")
async def _watch(ctx: Context, arg: str) -> Result:
    """Add a watch (or evaluate a halted one again) and show it now."""
    if not arg:
        return Result(tuple(ctx.watches) or ("no watches",))
    if arg not in ctx.watches:
        ctx.watches.append(arg)
    ctx.halted_watches.pop(arg, None)
    return watch_result(await watch_tables(ctx))


@command("unwatch", usage=":unwatch EXPR|all", help="stop watching EXPR (or every watch)")
async def _unwatch(ctx: Context, arg: str) -> Result:
    """Drop one watch or all of them."""
    if arg == "all":
        ctx.watches.clear()
        ctx.halted_watches.clear()
    elif arg in ctx.watches:
        ctx.watches.remove(arg)
        ctx.halted_watches.pop(arg, None)
    else:
        return Result((f"not watched: {arg}",), error=True)
    done = "no watches" if not ctx.watches else f"unwatched {arg}"
    return Result((done,), tables=tuple(await watch_tables(ctx)) or (("watch", EMPTY),))


EMPTY = Comparison((), "no watches")
"""The table a front end shows when the last watch is gone."""


async def watch_tables(ctx: Context) -> list[tuple[str, Comparison]]:
    """Every watch compared across the default targets.

    A watch that took a rank's whole time is halted: evaluated again after every step, it would
    cost every step that time again. `:watch EXPR` evaluates it again.
    """
    tables = []
    for expr in ctx.watches:
        halted = ctx.halted_watches.get(expr)
        if halted is None:
            answers = await evaluate(ctx.session, expr)
            table = compare(answers)
            late = [index for index, answer in answers.items() if overran(answer)]
            if late:
                ctx.halted_watches[expr] = f"it took {EVAL_TIMEOUT:g} s on {name_ranks(late)}"
        else:
            table = Comparison((), f"not evaluated since {halted} (:watch {expr} evaluates it again)")
        tables.append((f"watch {expr}", table))
    return tables


def watch_result(tables: list[tuple[str, Comparison]]) -> Result:
    """Watch tables as lines (`watch EXPR: verdict` then its rows) and as tables."""
    lines = []
    for title, table in tables:
        text = table.lines(WIDTH)
        lines.append(f"{title}: {text[0]}")
        lines.extend(text[1:])
    return Result(tuple(lines), tables=tuple(tables))


@command("where", usage=":where", help="where the target ranks stand, grouped, with counts")
async def _where(ctx: Context, arg: str) -> Result:
    """Distinct states of the targeted ranks, largest group first."""
    session = ctx.session
    groups: dict[str, set[int]] = {}
    for rank in session.live() or session.ranks:
        groups.setdefault(rank.state.describe(), set()).add(rank.index)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), min(item[1])))
    width = max(len(name_ranks(ranks)) for _, ranks in ordered)
    lines = [f"{len(ordered)} distinct location(s)" if len(ordered) > 1 else "every target rank is together"]
    for where, ranks in ordered:
        lines.append(f"{name_ranks(ranks):<{width}} │ {where} ({len(ranks)})")
    return Result(tuple(lines))


@command(
    "collectives",
    "coll",
    usage=":collectives [N]",
    help="the last N (default 10) collectives of every rank side by side, differing rows marked",
)
async def _collectives(ctx: Context, arg: str) -> Result:
    """The table, then any verdict the logs support."""
    last = collectives_count(arg)
    logs = await ctx.findings.verdicts.refresh()
    if not any(logs.values()):
        return Result(("no collective recorded yet (has the job called init_process_group?)",))
    lines = collectives_table(logs, last, ctx.session.topology)
    lines += [str(verdict) for verdict in await ctx.findings.verdicts.check()]
    return Result(tuple(lines))


def collectives_count(arg: str) -> int:
    """`:collectives [N]`'s N: how many of the last collectives to show (10 unless said)."""
    words = split(arg)
    if len(words) > 1 or not all(word.isdigit() for word in words):
        raise UsageError(f"N is a count, not {' '.join(words)!r}")
    return int(words[0]) if words else 10


@command(
    "ddp-check",
    usage=":ddp-check",
    help="DDP modules across ranks: parameters, buffers, gradients compared; parameters with no gradient;"
    " FSDP2/TP: DTensor replicas along replicated mesh dims",
)
async def _ddp_check(ctx: Context, arg: str) -> Result:
    """Compare the DDP replicas, and the replicas of DTensor parameters, of the paused target ranks."""
    session = ctx.session
    paused = [rank.index for rank in session.live() if rank.state.at_prompt]
    if not paused:
        return Result(("no target rank is at a prompt",), error=True)
    return Result(tuple(await ddp_check(session, paused)))


@command(
    "stacks",
    usage=":stacks [--all] [RANKS]",
    help="one tree of every target rank's stack, odd branches marked, waits annotated with their collective",
)
async def _stacks(ctx: Context, arg: str) -> Result:
    """The merged stack tree (library frames folded unless --all)."""
    session = ctx.session
    everything, spec = stacks_args(arg)
    targets = parse_ranks(spec, len(session.ranks), session.groups) if spec else None
    node = await merged(session, targets, collapse=not everything)
    return Result(tuple(render(node, WIDTH)), stack=node)


STACKS_OPTIONS = Options()
STACKS_OPTIONS.add_argument("--all", action="store_true")
STACKS_OPTIONS.add_argument("ranks", nargs="*")


def stacks_args(arg: str) -> tuple[bool, str]:
    """`:stacks`' `--all` (library frames unfolded) and its rank list (empty: the default targets)."""
    read = STACKS_OPTIONS.read(split(arg))
    return read.all, " ".join(read.ranks)
