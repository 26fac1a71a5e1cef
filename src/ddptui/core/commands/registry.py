"""Every `:` command, defined once with its help, returning a result both front ends show.

Batch mode prints a `Result` as `ddptui: ...` lines; the app writes the same lines to its command
log. `q`, `quit` and `exit` typed bare mean `:quit` in both.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from ddptui.core.commands.collectives_table import collectives_table
from ddptui.core.commands.context import Context
from ddptui.core.commands.result import Result as Result  # the commands' face: front ends use it
from ddptui.core.diagnosis.compare import Answer, Comparison, compare
from ddptui.core.diagnosis.ddp_check import ddp_check
from ddptui.core.diagnosis.stack_tree import render, stacks_node
from ddptui.core.model.state import Phase
from ddptui.core.model.targets import Line, TargetError, by_words, name_ranks, parse_ranks
from ddptui.core.session.lockstep import Broadcast
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError, answered
from ddptui.rank.asks import Eval, Interrupt, Skip, Timeouts
from ddptui.rank.protocol import Frame

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
EVAL_TIMEOUT = 5.0
"""Seconds a rank has to evaluate an expression for `:compare` and watches."""
TERMINAL_LINE = 4095
"""Longest line, in bytes, a terminal hands over whole to a program that reads plain lines
(Linux's n_tty buffer less the newline). The ranks ddptui starts read the commands it sends
that way (`LaunchSpec.line_editing`): a longer pdb command would arrive cut."""

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


async def run(ctx: Context, text: str) -> Result:
    """Run one command line (without its `:`)."""
    name, _, arg = text.strip().partition(" ")
    entry = COMMANDS.get(name)
    if entry is None:
        return Result((f"unknown command :{name} (:help lists the commands)",), error=True)
    try:
        return await entry.run(ctx, arg.strip())
    except TargetError as exc:
        return Result((str(exc),), error=True)


@command("ranks", "r", usage=":ranks [0,2-3|all|tp=0]", help="show or set the ranks a command goes to")
async def _ranks(ctx: Context, arg: str) -> Result:
    """Show or set the default targets."""
    session = ctx.session
    return Result((session.set_targets(arg),))


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


@command(
    "skip",
    usage=":skip [all|none]",
    help="the breakpoint() where the target ranks stand stops no more, on every rank "
    "(all: no breakpoint() stops; none: undo)",
)
async def _skip(ctx: Context, arg: str) -> Result:
    """Stop hard-coded breakpoints from stopping (pdb's own `b` breakpoints are untouched)."""
    session = ctx.session
    everyone = [rank.index for rank in session.live(range(len(session.ranks)))]
    if arg in ("all", "none"):
        await session.ask(Skip(all=True) if arg == "all" else Skip(none=True), everyone)
        if arg == "all":
            return Result(("no breakpoint() stops any more, on any rank (:skip none undoes)",))
        return Result(("every breakpoint() stops again",))
    if arg:
        return Result((f"usage: {COMMANDS['skip'].usage}",), error=True)
    paused = [rank.index for rank in session.live() if rank.state.at_prompt]
    answers = await session.ask(Skip(), paused)
    sites = {skipping.here for skipping in answered(answers).values() if skipping.here}
    if not sites:
        return Result(("no target rank stands at a breakpoint() call",), error=True)
    await session.ask(Skip(sites=tuple(sites)), everyone)
    where = ", ".join(sorted(str(Frame(file, line)) for file, line in sites))
    return Result((f"breakpoint at {where} stops no more, on any rank (:skip none undoes)",))


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
        from ddptui.core.commands.until import release

        await release(session, line.targets)
        session.lockstep.unhold(line.targets)  # and resumes a rank whose evaluation still runs
    result = await session.broadcast(line.text, line.targets, on_sent)
    waiting = ((a.rank, a.state.describe()) for a in result.replies if a.state.phase is Phase.WAITING)
    notes = [f"{ranks} {where}" for ranks, where in by_words(waiting)]
    watched = watch_result(await watch_tables(ctx))
    return result, Result((*notes, *watched.lines), tables=watched.tables)


async def evaluate(session: Session, expr: str, targets: Iterable[int] | None = None) -> dict[int, Answer]:
    """EXPR evaluated by every targeted live rank: its summary, or why there is none.

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
    for index, reply in (await session.ask(Eval(expr), paused, EVAL_TIMEOUT)).items():
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
    session = ctx.session
    tol = None
    if arg.startswith("--tol"):
        _, value, arg = [*arg.split(None, 2), "", ""][:3]
        try:
            tol = float(value)
        except ValueError:
            return Result((f"--tol needs a number, not {value!r}",), error=True)
    if not arg.strip():
        return Result((f"usage: {COMMANDS['compare'].usage}",), error=True)
    table = await comparison(session, arg.strip(), tol)
    ctx.last_compare = table
    return Result(tuple(table.lines(WIDTH)), tables=((f":compare {arg.strip()}", table),))


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
    if arg and not arg.isdigit():
        return Result((f"usage: {COMMANDS['collectives'].usage}",), error=True)
    logs = await ctx.findings.verdicts.refresh()
    if not any(logs.values()):
        return Result(("no collective recorded yet (has the job called init_process_group?)",))
    lines = collectives_table(logs, int(arg or 10), ctx.session.topology)
    lines += [str(verdict) for verdict in await ctx.findings.verdicts.check()]
    return Result(tuple(lines))


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
    "group",
    usage=":group [NAME (0,2-3 | from-compare ROW)]",
    help="name a set of ranks for @NAME CMD and :ranks NAME (from a list, or a row of the last :compare)",
)
async def _group(ctx: Context, arg: str) -> Result:
    """Define a group, or list them."""
    session = ctx.session
    if not arg:
        listed = [f"{name}: {name_ranks(ranks)}" for name, ranks in session.groups.items()]
        return Result(tuple(listed) or ("no groups (:group NAME 0,2-3)",))
    name, _, spec = arg.partition(" ")
    if not name.isidentifier() or name in ("all",):
        return Result((f"a group name is a word, not {name!r}",), error=True)
    source, _, row = spec.strip().partition(" ")
    if source == "from-compare":
        table = ctx.last_compare
        if table is None or not row.strip().isdigit() or not 1 <= int(row) <= len(table.rows):
            return Result(
                ("from-compare ROW: a row number of the last :compare table (1 = first)",), error=True
            )
        ranks = table.rows[int(row) - 1].ranks
    else:
        ranks = parse_ranks(spec, len(session.ranks), session.groups)
    session.set_group(name, ranks)
    return Result((f"group {name}: {name_ranks(ranks)}",))


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
    from ddptui.core.commands.until import until_collective  # it builds on this module's Result

    held = guard(session, None, ":until-collective ! runs anyway") if arg != "!" else None
    if held is not None:
        return held
    return dataclasses.replace(await until_collective(session), sent="c")


@command(
    "stacks",
    usage=":stacks [--all] [RANKS]",
    help="one tree of every target rank's stack, odd branches marked, waits annotated with their collective",
)
async def _stacks(ctx: Context, arg: str) -> Result:
    """The merged stack tree (library frames folded unless --all)."""
    session = ctx.session
    node = await stacks_node(session, arg)
    return Result(tuple(render(node, WIDTH)), stack=node)


@command("quit", "q", "exit", usage=":quit", help="end every rank and leave")
async def _quit(ctx: Context, arg: str) -> Result:
    """Ask the front end to end the session."""
    return Result(quit=True)
