"""`:interrupt`: ranks that run are stopped where they stand (Ctrl-C in their terminals) and can go on."""

from __future__ import annotations

import asyncio
import signal

import pytest
from conftest import SCRIPTS, running_session

from ddptui.core.commands import registry as commands
from ddptui.core.commands.context import Context
from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session

LOOP = {f"tests/scripts/spins.py:{line}" for line in (11, 12, 13)}
"""The lines of spins.py's endless loop."""


def where(session: Session) -> set[str]:
    """Where the paused ranks stand."""
    return {str(rank.state.location) for rank in session.ranks if rank.state.at_prompt}


async def running(session: Session) -> None:
    """Wait until every rank runs spins.py's loop."""
    assert await session.wait_until(
        lambda: all(
            r.state.phase is Phase.RUNNING and b"spinning" in r.output.tail(4096) for r in session.ranks
        ),
        timeout=10,
    )


async def test_continued_ranks_stop_in_their_loop_and_go_on() -> None:
    async with running_session(SCRIPTS / "spins.py") as session:
        ctx = Context.of(session)
        await session.wait_settled()
        for _ in range(2):  # and again: a rank stopped by an interrupt can be interrupted again
            going = asyncio.ensure_future(session.broadcast("c"))
            await running(session)
            said = await commands.run(ctx, "interrupt")
            assert said.lines == ("interrupted ranks 0-1: each stops at the line it runs",)
            result = await asyncio.wait_for(going, 30)  # the `c` returns: every rank is back at a prompt
            assert [reply.state.phase for reply in result.replies] == [Phase.PAUSED] * 2
            assert where(session) <= LOOP, where(session)
        answers = await commands.evaluate(session, "i > 0")
        assert [answer["repr"] for answer in answers.values()] == ["True", "True"]  # type: ignore[index]


@pytest.mark.parametrize("ignored", [False, True], ids=["", "sigint-ignored"])
async def test_ranks_that_never_stopped_open_a_prompt_where_they_run(ignored: bool) -> None:
    """Also when ddptui itself ignores SIGINT, as a background job does (`ddptui ... &` in a
    script): the ranks do not inherit it."""
    previous = signal.getsignal(signal.SIGINT)
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        async with running_session(SCRIPTS / "spins.py", "--run") as session:
            ctx = Context.of(session)
            await running(session)
            said = await commands.run(ctx, "interrupt")
            assert said.lines == ("interrupted ranks 0-1: each stops at the line it runs",)
            assert await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), 30)
            assert where(session) <= LOOP, where(session)
            result = await session.broadcast("n")  # a stop like any other: the ranks step on from it
            assert all(reply.state.phase is Phase.PAUSED for reply in result.replies)
            assert await commands.run(ctx, "interrupt") == commands.Result(
                ("no target rank is running: nothing to interrupt",)
            )
    finally:
        signal.signal(signal.SIGINT, previous)
