"""The hunt behind `:until EXPR` and `:until-diverge EXPR`: continue every target rank in lockstep,
stop after stop, until a check of EXPR at a stop says it found what it looks for.

It works as `while not found(EXPR): c`: EXPR is evaluated on every paused target rank where they
stand (stop 0), then after each lockstep `c` (`Session.broadcast`, behind the divergence guard).
It ends when the check finds something, after `max_stops` continues, when a continued rank ends,
crashes or waits in a collective, when no target rank is paused, or when the user stops it
(`Context.interrupt`: a cancel of the task that runs it, taken once the stop in flight is back, so
every rank it continued is at its prompt again). An EXPR that raises on a rank counts as not found
there and is said at the end; one that raises on every rank after a continue ends the hunt.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from ddptui.core.commands.context import Context
from ddptui.core.commands.inspecting import evaluate, watch_result, watch_tables
from ddptui.core.commands.result import Result
from ddptui.core.commands.sending import guard, sending_lines
from ddptui.core.diagnosis.compare import Answer
from ddptui.core.model.targets import by_words

Check = Callable[[Mapping[int, Answer], int, str], Result | None]
"""A hunt's test at one stop: the ranks' answers, the stop's number and where the ranks stand;
the result that ends the hunt, or None to go on."""


NO_STOP_ON_THE_WAY = (
    " (EXPR is looked at where a c stops, and the first c met no breakpoint: "
    "set one on the way, --break FILE:LINE or b FILE:LINE)"
)
"""Said when every rank ran to its end at the first continue: there was nowhere to look at EXPR."""


@dataclass
class Hunt:
    """One `:until` or `:until-diverge`: what it evaluates, how it judges, how far it may go."""

    command: str
    """`:until bool(loss.isnan())`: the command as the user gave it, for its progress and its words."""
    expr: str
    check: Check
    max_stops: int
    truth: bool = False
    """Ask each rank for `bool(EXPR)` rather than EXPR's summary."""
    stops: int = 0
    """Lockstep continues made so far."""
    raised: dict[int, tuple[int, str]] = field(default_factory=dict)
    """Ranks where EXPR raised: the first stop it did and what it raised."""

    async def run(self, ctx: Context) -> Result:
        """Hunt until the check finds something or something else ends it (see the module)."""
        if ctx.hunting is not None:
            return Result(("not run: an :until runs already (Escape or F12 stops it)",), error=True)
        ctx.hunting, ctx.stopped_by_user = asyncio.current_task(), False
        try:
            result = await self._hunt(ctx)
        finally:
            ctx.hunting = None
            ctx.progress("")
        watched = watch_result(await watch_tables(ctx)) if ctx.watches else Result()
        return Result(
            (*result.lines, *self._raised_lines(), *watched.lines),
            error=result.error,
            sent="c" if self.stops else "",
            tables=(*result.tables, *watched.tables),
        )

    async def _hunt(self, ctx: Context) -> Result:
        """Stop after stop until one ends the hunt; a user's stop lets the stop in flight come back."""
        look: Callable[[Context], Awaitable[Result | None]] = self._look  # stop 0: where they stand
        while True:
            step = asyncio.ensure_future(look(ctx))
            look = self._step
            try:
                ended = await asyncio.shield(step)
            except asyncio.CancelledError:
                if not ctx.stopped_by_user:
                    step.cancel()
                    raise
                ended = await step  # the ranks it continued come back to their prompts first
                asyncio.current_task().uncancel()  # type: ignore[union-attr]
                return ended or self._stopped_by_user(ctx)
            if ended is not None:
                return ended

    async def _step(self, ctx: Context) -> Result | None:
        """One lockstep `c` and the check after it; the result that ends the hunt, or None."""
        if self.stops >= self.max_stops:
            return self._bound(ctx)
        blocked = await self._blocked(ctx)
        if blocked is not None:
            return blocked
        sent = await ctx.session.broadcast("c")
        if not sent.replies:  # held or skipped on every rank: no continue was made
            return Result((f"{self.command} stopped{self._after()}", *sending_lines(sent)), error=True)
        self.stops += 1
        for told in ctx.on_stop:
            told(sent)
        ctx.progress(f"{self.command} … stop {self.stops}…")
        if sent.skipped or sent.held:
            return Result((f"{self.command} stopped at stop {self.stops}", *sending_lines(sent)), error=True)
        gone = [(a.rank, a.state.describe()) for a in sent.replies if not _can_go_on(ctx, a.rank)]
        if gone:  # those first, then where the others stand
            rest = [(a.rank, a.state.describe()) for a in sent.replies if _can_go_on(ctx, a.rank)]
            ended = all(a.state.exit_code is not None for a in sent.replies)
            hint = NO_STOP_ON_THE_WAY if ended and self.stops == 1 else ""
            return Result(
                (f"{self.command} stopped at stop {self.stops}: {_said([*gone, *rest])}{hint}",), error=True
            )
        return await self._look(ctx)

    async def _blocked(self, ctx: Context) -> Result | None:
        """Why the target ranks cannot be continued together now; None when they can."""
        session = ctx.session
        await session.wait_settled()
        ranks = session.live()
        if not ranks:
            return Result((f"{self.command} stopped{self._after()}: no target rank is alive",), error=True)
        stuck = [(r.index, r.state.describe()) for r in ranks if not _can_go_on(ctx, r.index)]
        if stuck:  # post-mortem, or waiting in a collective: a `c` would end it, or not reach it
            return Result((f"{self.command} stopped{self._after()}: {_said(stuck)}",), error=True)
        held = guard(session, None, f"{self.command} continues only ranks that stand together")
        if held is not None:
            return Result((f"{self.command} stopped{self._after()}", *held.lines), error=True)
        return None

    async def _look(self, ctx: Context) -> Result | None:
        """Evaluate EXPR on the paused target ranks and judge it; the result that ends the hunt, or None."""
        session = ctx.session
        paused = [r.index for r in session.live() if r.state.at_prompt and not r.state.post_mortem]
        answers = await evaluate(session, self.expr, paused, truth=self.truth)
        errors = {rank: answer for rank, answer in answers.items() if isinstance(answer, str)}
        for rank, error in errors.items():
            self.raised.setdefault(rank, (self.stops, error))
        where = " · ".join(sorted({str(r.state.location) for r in session.live(paused) if r.state.location}))
        found = self.check(answers, self.stops, where)
        if found is not None:
            return found
        if self.stops and answers and len(errors) == len(answers):  # what raised: `_raised_lines`
            return Result(
                (f"{self.command} stopped at stop {self.stops}: {self.expr} raised on every rank",),
                error=True,
            )
        return None

    def _bound(self, ctx: Context) -> Result:
        """The hunt made its last allowed continue without finding anything."""
        where = " · ".join(by_place(ctx))
        text = f"{self.command} reached --max-stops {self.max_stops}: not found in {_stops(self.stops)}"
        return Result((f"{text}; {where}" if where else text,))

    def _stopped_by_user(self, ctx: Context) -> Result:
        """The user stopped the hunt between two stops."""
        where = " · ".join(by_place(ctx))
        text = f"{self.command} stopped by the user after {_stops(self.stops)}"
        return Result((f"{text}; {where}" if where else text,))

    def _after(self) -> str:
        """` after 3 stops`, or nothing before the first."""
        return f" after {_stops(self.stops)}" if self.stops else ""

    def _raised_lines(self) -> list[str]:
        """`EXPR raised on rank 1 (from stop 0): NameError: ...`, one line per distinct error."""
        said = by_words((rank, f"(from stop {stop}): {text}") for rank, (stop, text) in self.raised.items())
        return [f"{self.expr} raised on {ranks} {text}" for ranks, text in said]


def _said(states: list[tuple[int, str]]) -> str:
    """`rank 1 exited 0; ranks 0,2 paused at train.py:9`: ranks in the same state said once."""
    return "; ".join(f"{ranks} {words}" for ranks, words in by_words(states))


def _stops(count: int) -> str:
    """`1 stop`, `3 stops`."""
    return f"{count} stop{'s' if count != 1 else ''}"


def _can_go_on(ctx: Context, index: int) -> bool:
    """Whether a continued rank is back at a prompt it can continue from (not ended, crashed,
    waiting in a collective, nor in post-mortem)."""
    state = ctx.session.ranks[index].state
    return state.at_prompt and not state.post_mortem


def by_place(ctx: Context, indices: list[int] | None = None) -> list[str]:
    """`ranks 0-3 paused at train.py:19`: the target ranks (or `indices`) grouped by their state."""
    ranks = ctx.session.live(indices)
    return [f"{who} {words}" for who, words in by_words((r.index, r.state.describe()) for r in ranks)]
