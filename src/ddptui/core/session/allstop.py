"""`AllStop`: when a rank stops on its own, the other ranks stop too (gdb's all-stop mode).

A rank stops on its own at a breakpoint (pdb's `b`, or a hard-coded `breakpoint()`) or in
post-mortem after a crash, as the first `paused` event of that stop says (`Rank.why`). The end of
a step ddptui sent, an interrupt, and `:until-collective`'s stop do not count: a lockstep `n`
brings the ranks back to their prompts one by one, and none of them is interrupted for it.

The other ranks get `GRACE` seconds to stop on their own (a `c` sent to every rank brings each
to the same breakpoint, a little apart), and `GRACE` again while some of them did within the last
one (many ranks on few cores reach it seconds apart), up to `STARTUP_WAIT`. Then each rank still
running is looked at: one blocked in a collective, in the rendezvous or on a point-to-point op's
work (a pipeline stage waiting for its activations; none can complete while the stopped rank is
away) is marked `waiting` there at once, without waiting for the stall timeout; one still starting
(in an import, or not yet in the user's code: seconds with torch, or with many ranks on few cores)
gets the grace again, up to `STARTUP_WAIT`, as it is likely on its way to the same breakpoint; any
other is interrupted and stops at its next line of the user's code (the `interrupt` request, as
`:interrupt` sends).
What happened is said once, the rank that stopped first and why at its head:
`all-stop: rank 2 stopped at train.py:19 (breakpoint); ranks 0-1,3 stopped at their next line`.
`--non-stop` (`LaunchSpec.all_stop` False) leaves the other ranks running.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ddptui.core.model.stacks import blocked_at, is_library
from ddptui.core.model.state import PAUSED, RUNNING, STARTING, WAITING, Frame, RankState
from ddptui.core.model.targets import by_words, name_ranks
from ddptui.core.model.topology import Topology
from ddptui.core.session.rank import Rank
from ddptui.core.session.stalls import WORK_RECORDS, main_stack, waited_op
from ddptui.core.transport.interface import RequestError
from ddptui.rank.asks import Ask, Collectives, Interrupt

R = TypeVar("R")

GRACE = 1.0
"""Seconds the other ranks get to stop on their own before they are stopped."""
STARTUP_WAIT = 30.0
"""Seconds a rank still starting is given to stop by itself before it is interrupted there."""
STOP_WAIT = 5.0
"""Seconds the interrupted ranks get to open their prompts before what happened is said."""
STOPS = ("breakpoint", "post-mortem")
"""The `Paused.why` of a rank that stops on its own (an interrupt or a step's end does not count)."""
WAITING_FILES = ("distributed_c10d.py", "_functional_collectives.py", "rendezvous.py")
"""Where a rank waits for the others: torch's collectives (the functional ones too, which DTensor
and tensor parallel wait on in `wait_tensor`) and its rendezvous."""


class Stopping(Protocol):
    """What all-stop needs of the session (`Session` is one)."""

    ranks: list[Rank]

    @property
    def topology(self) -> Topology:
        """The job's process groups, to name the one a rank waits in."""

    def log(self, line: str) -> None:
        """Tell the user."""

    def ask(
        self, ask: Ask[R], targets: Iterable[int], timeout: float = 2.0
    ) -> Awaitable[dict[int, R | RequestError]]:
        """Ask every target rank at once."""

    def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> Awaitable[bool]:
        """Wait until `condition()` holds; False if `timeout` passed first."""

    def notify(self) -> None:
        """Wake the coroutines waiting for a change."""


def running(ranks: Iterable[Rank]) -> list[Rank]:
    """The live ranks among `ranks` that run: starting or running, neither at a prompt nor waiting."""
    return [rank for rank in ranks if rank.state.alive and rank.state.phase in (STARTING, RUNNING)]


def still_starting(frames: list[Frame]) -> bool:
    """True when a stack shows a rank still starting, likely to reach the same breakpoint by itself:
    it stands in an import (torch takes seconds), or holds no frame of the user's code yet (ddptui's
    and Python's start of the program; many ranks on few cores take seconds there too)."""
    return any(frame.file.startswith("<frozen importlib") for frame in frames) or all(
        is_library(frame.file) for frame in frames
    )


def in_collective(frames: list[Frame]) -> bool:
    """True when a stack (innermost first) stands in a torch collective or rendezvous under the
    user's code: the rank waits there for the others."""
    where, _ = blocked_at(frames)
    inner = frames[: frames.index(where)] if where is not None else frames
    return any(frame.file.endswith(WAITING_FILES) for frame in inner)


async def blocked_ranks(ranks: list[Rank]) -> dict[int, tuple[Frame | None, str | None]]:
    """The ranks among `ranks` blocked in a collective or the rendezvous, each with where and in
    what (`blocked_at`), from their main thread's stack."""
    stacks = await asyncio.gather(*(main_stack(rank) for rank in ranks))
    return {
        rank.index: blocked_at(frames)
        for rank, frames in zip(ranks, stacks, strict=True)
        if in_collective(frames)
    }


@dataclass
class Outcome:
    """What all-stop did to the other ranks."""

    interrupted: list[Rank] = field(default_factory=list)
    refused: dict[int, RequestError] = field(default_factory=dict)
    """Ranks the interrupt did not reach, and why."""
    blocked: dict[int, tuple[Frame | None, str | None]] = field(default_factory=dict)
    """Ranks blocked in a collective or the rendezvous: where, and in what (`blocked_at`)."""


class AllStop:
    """Listens to the session's ranks (`on_state`) and stops the others when one stops on its own."""

    def __init__(
        self,
        session: Stopping,
        spawn: Callable[[Coroutine[Any, Any, None]], None],
        place: Callable[[Rank, Frame | None, str | None], Awaitable[None]],
    ) -> None:
        """`spawn` runs the stopping in the background (the session's, cancelled as it closes);
        `place` marks a rank waiting where it is blocked (`StallWatch.place`)."""
        self._session = session
        self._spawn = spawn
        self._place = place
        self._seen: dict[int, int] = {}
        """Each rank's `paused_count` at the last stop of its own looked at: a stop is looked at once."""
        self._stopping = False
        """True while the others are being stopped: a second rank stopping meanwhile is one of them."""
        self._others: list[Rank] | None = None
        """During the grace, the ranks it waits for; emptied the moment none of them runs (a
        broadcast may set them running again before the waiting coroutine looks)."""
        self._holding: tuple[Rank, int] | None = None
        """The rank last stopped on its own and the `paused_count` of that stop, while it may hold
        the others: a rank released from its wait meanwhile is stopped again."""
        self._waiting: set[int] = set()
        """The ranks last seen waiting."""

    @property
    def stopping(self) -> bool:
        """True while the other ranks are being stopped (until what was done is said)."""
        return self._stopping

    def on_state(self, index: int, state: RankState) -> None:
        """A rank's state changed: when a breakpoint or a crash opened its prompt while other ranks
        run, stop them. (Called twice a rank a lockstep step: the common case returns at once.)"""
        if self._others and not running(self._others):
            self._others = []
        if state.phase is not PAUSED:
            self._released(index, state)
            return
        self._waiting.discard(index)
        ranks = self._session.ranks
        first = ranks[index]
        if first.why not in STOPS or self._seen.get(index) == first.paused_count:
            return  # a step's end (no `why`), or the same stop told again (its state changed)
        self._seen[index] = first.paused_count
        self._holding = (first, first.paused_count)
        if not (self._stopping or state.ended_by_ddptui) and running(r for r in ranks if r is not first):
            self._stopping = True
            self._spawn(self._stop_others(first))

    def _released(self, index: int, state: RankState) -> None:
        """A rank that waited runs again: when the rank last stopped on its own still stands at that
        stop (a `c` sent to it alone took it through the collective the others waited in, to its
        breakpoint again), the released rank runs beside a stopped one: stop it too."""
        waited = index in self._waiting
        if state.phase is WAITING:
            self._waiting.add(index)
            return
        self._waiting.discard(index)
        holding = self._holding
        if not waited or state.phase is not RUNNING or holding is None or self._stopping:
            return
        first, count = holding
        if first.index != index and first.state.at_prompt and first.paused_count == count:
            self._stopping = True
            self._spawn(self._stop_others(first))

    async def _stop_others(self, first: Rank) -> None:
        """Give the others `GRACE` to stop on their own, then stop or place each one still running,
        unless `first` left its prompt meanwhile (the user resumed it); a rank still starting
        gets the grace again, up to `STARTUP_WAIT`. Say what was done, once."""
        session = self._session
        done = Outcome()
        patient_until = time.monotonic() + STARTUP_WAIT
        try:
            waiting_for = self._others = [rank for rank in session.ranks if rank is not first]
            counts = {rank.index: rank.paused_count for rank in session.ranks}
            arrived = 0
            while waiting_for:
                await session.wait_until(lambda: not self._others or not first.state.at_prompt, GRACE)
                now = self._arrived(first, counts, done)
                if now > arrived and time.monotonic() < patient_until:
                    arrived = now  # ranks still reach their stops by themselves: wait for the rest
                    continue
                # a rank that stopped since has stopped: if it runs again, a command resumed it
                late = (
                    [r for r in running(waiting_for) if r.paused_count == counts[r.index]]
                    if self._others
                    else []
                )
                if not first.state.at_prompt or first.paused_count != counts[first.index] or not late:
                    break
                waiting_for = self._others = await self._stop(
                    late, done, time.monotonic() < patient_until, counts
                )
            if done.interrupted or done.refused or done.blocked:
                session.log(await self._said(first, done))
            # after the line: what is said of the waiting ranks (verdicts) follows its cause
            await asyncio.gather(*(self._place(session.ranks[i], *at) for i, at in done.blocked.items()))
        finally:
            self._stopping, self._others = False, None
            session.notify()

    def _arrived(self, first: Rank, counts: dict[int, int], done: Outcome) -> int:
        """How many of the other ranks stopped by themselves since `first` did (not interrupted)."""
        interrupted = {rank.index for rank in done.interrupted}
        return sum(
            1
            for rank in self._session.ranks
            if rank is not first
            and rank.index not in interrupted
            and rank.paused_count != counts[rank.index]
            and rank.why in STOPS
        )

    async def _stop(
        self, late: list[Rank], done: Outcome, patient: bool, counts: dict[int, int]
    ) -> list[Rank]:
        """Place the ranks blocked in a collective, interrupt the others that run (unless `patient`
        and still starting: those are returned, to be looked at again) and wait until they stop."""
        session = self._session
        stacks = await asyncio.gather(*(main_stack(rank) for rank in late))
        elsewhere = [
            rank.index for rank, frames in zip(late, stacks, strict=True) if not in_collective(frames)
        ]
        records = await session.ask(Collectives(last=WORK_RECORDS), elsewhere, 1.0) if elsewhere else {}
        starting, asked = [], []
        for rank, frames in zip(late, stacks, strict=True):
            op = waited_op(records.get(rank.index))
            if in_collective(frames):
                done.blocked[rank.index] = blocked_at(frames)
            elif op is not None:
                done.blocked[rank.index] = (blocked_at(frames)[0], op)
            elif patient and (not rank.transport.linked or still_starting(frames)):
                starting.append(rank)
            else:
                asked.append(rank)
        # the stacks take a while with many ranks: one that stopped meanwhile, or that a command
        # resumed after it stopped, is not to be interrupted
        asked = [rank for rank in running(asked) if rank.paused_count == counts[rank.index]]
        answers = await session.ask(Interrupt(), [rank.index for rank in asked]) if asked else {}
        interrupted = [rank for rank in asked if answers.get(rank.index) is True]
        done.interrupted += interrupted
        done.refused.update((i, reply) for i, reply in answers.items() if isinstance(reply, RequestError))
        await session.wait_until(lambda: not running(interrupted), STOP_WAIT)
        return starting

    async def _said(self, first: Rank, done: Outcome) -> str:
        """The one line that says what all-stop did: who stopped first and why, then the others."""
        state = first.state
        crash = state.crash
        why = f"crashed {dataclasses.replace(crash, where=None)}, in post-mortem" if crash else "breakpoint"
        parts = [f"all-stop: rank {first.index} stopped at {state.location} ({why})"]
        stopped = [rank.index for rank in done.interrupted if rank.state.at_prompt]
        if stopped:
            parts.append(f"{name_ranks(stopped)} stopped at their next line")
        pending = [rank.index for rank in done.interrupted if rank.state.alive and not rank.state.at_prompt]
        if pending:
            each = "it stops" if len(pending) == 1 else "each stops"
            parts.append(f"{name_ranks(pending)} interrupted: {each} once its current call returns")
        refused = ((index, str(reply)) for index, reply in done.refused.items())
        parts += [f"{ranks} not stopped: {why}" for ranks, why in by_words(refused)]
        groups = await self._groups(list(done.blocked))
        waits = ((i, f"{callee or 'a call'}{groups.get(i, '')}") for i, (_, callee) in done.blocked.items())
        parts += [f"{ranks} waiting in {words} for rank {first.index}" for ranks, words in by_words(waits)]
        return "; ".join(parts)

    async def _groups(self, indices: list[int]) -> dict[int, str]:
        """` (WORLD)`: the process group each rank's collective in flight belongs to, where its
        record says (nothing for a rank whose last record is complete, or that cannot answer)."""
        if not indices:
            return {}
        session = self._session
        answers = await session.ask(Collectives(last=1), indices, 1.0)
        names = {}
        for index, records in answers.items():
            if isinstance(records, list) and records and records[-1].get("state") != "completed":
                pg = records[-1].get("pg")
                if isinstance(pg, str):
                    names[index] = f" ({session.topology.group_name(pg)})"
        return names
