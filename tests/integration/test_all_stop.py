"""All-stop: when a rank stops at a breakpoint or crashes into post-mortem while the others run,
they stop too (at their next line, or shown waiting in the collective they block in); a lockstep
step stops nobody; `--non-stop` lets them run on. Four real ranks on gloo each time."""

from __future__ import annotations

import asyncio
import time

from conftest import SCRIPTS, Runner, running_session, summary

from ddptui.core.commands.context import Context
from ddptui.core.model.state import Phase
from ddptui.core.session.rank import Rank
from ddptui.core.session.session import Session

LOOP = "tests/scripts/allstop_loop.py"
LOOP_LINES = {11, 12, 17}
"""The lines of allstop_loop.py's loop a rank that runs it stops at when interrupted."""
COLLECTIVE = "tests/scripts/allstop_collective.py"
LOCKSTEP = "tests/scripts/allstop_lockstep.py"


def all_stops(session: Session) -> list[str]:
    """What all-stop said."""
    return [line for line in session.notices if line.startswith("all-stop:")]


def interrupted(rank: Rank) -> bool:
    """True when the rank's pdb said it was interrupted."""
    return b"Program interrupted." in rank.output.tail(1 << 16)


def stopped_in_loop(session: Session, script: str, lines: set[int]) -> bool:
    """Every rank but 2 at a prompt of its own at one of `lines` of `script`, stopped by an interrupt."""
    others = [rank for rank in session.ranks if rank.index != 2]
    return all(
        rank.state.at_prompt
        and interrupted(rank)
        and str(rank.state.location).rpartition(":")[0] == script
        and rank.state.location is not None
        and rank.state.location.line in lines
        for rank in others
    )


async def test_a_breakpoint_on_one_rank_stops_the_others_at_their_next_line() -> None:
    async with running_session(SCRIPTS / "allstop_loop.py", nproc=4, stall_timeout=30) as session:
        assert await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), 30)
        assert str(session.ranks[2].state.location) == f"{LOOP}:16" and not interrupted(session.ranks[2])
        assert stopped_in_loop(session, LOOP, LOOP_LINES), [r.state.describe() for r in session.ranks]
        assert await session.wait_until(lambda: bool(all_stops(session)), 10)
        assert all_stops(session) == [
            f"all-stop: rank 2 stopped at {LOOP}:16 (breakpoint); ranks 0-1,3 stopped at their next line"
        ]


async def test_a_crash_into_post_mortem_stops_the_others() -> None:
    async with running_session(SCRIPTS / "allstop_loop.py", "--crash", nproc=4, stall_timeout=30) as session:
        assert await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), 30)
        crashed = session.ranks[2].state
        assert crashed.post_mortem and crashed.crash is not None
        assert stopped_in_loop(session, LOOP, LOOP_LINES), [r.state.describe() for r in session.ranks]
        assert await session.wait_until(lambda: bool(all_stops(session)), 10)
        assert all_stops(session) == [
            f"all-stop: rank 2 stopped at {LOOP}:14 (crashed ValueError: boom at step 3, in post-mortem); "
            "ranks 0-1,3 stopped at their next line"
        ]


async def test_ranks_blocked_in_the_collective_are_shown_waiting_there_at_once() -> None:
    """Within seconds, not the stall timeout (60 s here); and they are not interrupted: once
    rank 2 goes on, the all_reduce completes and every rank runs to its end."""
    async with running_session(SCRIPTS / "allstop_collective.py", nproc=4, stall_timeout=60) as session:
        Context.of(session)  # the verdicts listen, as in both front ends
        began = time.monotonic()
        others = [rank for rank in session.ranks if rank.index != 2]
        assert await session.wait_until(
            lambda: all(rank.state.phase is Phase.WAITING for rank in others), 40
        ), [r.state.describe() for r in session.ranks]
        assert time.monotonic() - began < 40
        assert str(session.ranks[2].state.location) == f"{COLLECTIVE}:12"
        assert {rank.state.describe() for rank in others} == {f"waiting at {COLLECTIVE}:13 in all_reduce"}
        said = all_stops(session)
        assert said == [
            f"all-stop: rank 2 stopped at {COLLECTIVE}:12 (breakpoint); "
            "ranks 0-1,3 waiting in all_reduce (WORLD) for rank 2"
        ]
        await asyncio.sleep(1.5)  # the watchdog looks at them again: still waiting, not running
        assert all(rank.state.phase is Phase.WAITING for rank in others)
        await session.broadcast("c", [2])
        assert await session.wait_until(lambda: all(r.state.exit_code == 0 for r in session.ranks), 30)
        assert all(b"total 20.0" in rank.output.tail(4096) for rank in session.ranks)


async def test_lockstep_steps_stop_nobody_and_a_lone_breakpoint_stops_everyone() -> None:
    """`n` and `c` sent to every rank bring them back one by one: no rank is interrupted, nothing
    is said; then a `c` that takes rank 2 alone to a breakpoint stops the others, said once."""
    async with running_session(SCRIPTS / "allstop_lockstep.py", nproc=4, stall_timeout=30) as session:
        await session.wait_settled()
        for command in ("n", "n", "c", "n", "c"):
            result = await asyncio.wait_for(session.broadcast(command), 60)
            assert [a.state.phase for a in result.replies] == [Phase.PAUSED] * 4, command
            assert len({str(a.state.location) for a in result.replies}) == 1, command
            assert not any(interrupted(rank) for rank in session.ranks)
        await asyncio.sleep(1.5)  # longer than the grace: an all-stop would have spoken by now
        assert all_stops(session) == []
        result = await asyncio.wait_for(session.broadcast("c"), 60)
        assert all(a.state.phase is Phase.PAUSED for a in result.replies)
        assert str(session.ranks[2].state.location) == f"{LOCKSTEP}:18"
        assert stopped_in_loop(session, LOCKSTEP, {15, 16, 19})
        assert await session.wait_until(lambda: bool(all_stops(session)), 10)
        assert all_stops(session) == [
            f"all-stop: rank 2 stopped at {LOCKSTEP}:18 (breakpoint); ranks 0-1,3 stopped at their next line"
        ]


def test_batch_stops_every_rank_and_non_stop_lets_them_run_on(ddptui: Runner) -> None:
    stopped = ddptui.batch(SCRIPTS / "allstop_loop.py", "p step\n", nproc=4, stall=30)
    assert stopped.returncode != 0, stopped.stdout  # ranks left paused: ended by ddptui
    assert (
        f"ddptui: all-stop: rank 2 stopped at {LOOP}:16 (breakpoint); ranks 0-1,3 stopped" in stopped.stdout
    )
    states = summary(stopped.stdout)
    assert all(states[rank].startswith(f"paused at {LOOP}:") for rank in range(4)), stopped.stdout
    running_on = ddptui.batch(SCRIPTS / "allstop_loop.py", "p step\n", "--non-stop", nproc=4, stall=30)
    assert "all-stop" not in running_on.stdout + running_on.stderr
    states = summary(running_on.stdout)
    assert states[2] == f"paused at {LOOP}:16 (ended by ddptui)", running_on.stdout
    assert [states[rank] for rank in (0, 1, 3)] == ["exited 0"] * 3, running_on.stdout


async def test_ranks_still_arriving_at_the_breakpoint_are_waited_for_not_interrupted() -> None:
    """Rank R reaches the breakpoint 0.6*R s after rank 0 (beyond one grace for ranks 2 and 3):
    as long as ranks keep arriving, all-stop waits for the rest; each stops at the breakpoint."""
    script = "tests/scripts/staggered_breakpoint.py"
    async with running_session(SCRIPTS / "staggered_breakpoint.py", nproc=4, stall_timeout=30) as session:
        assert await session.wait_until(lambda: all(r.state.at_prompt for r in session.ranks), 30)
        assert [str(r.state.location) for r in session.ranks] == [f"{script}:12"] * 4
        assert not any(interrupted(rank) for rank in session.ranks)
        assert all_stops(session) == []
