"""One look at every rank of an attached job: its CPU use over a short sample, then its stack.

A rank using under `BUSY` percent of a core is idle; with its stack, `waiting` where it stands.
Stacks are read through py-spy (`ddptui.core.attach.py_spy`), a few ranks at a time, without pausing any.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

from ddptui.core.attach.job import Job, RankProcess
from ddptui.core.attach.py_spy import NOT_INSTALLED, NOT_PERMITTED, StackError, read_stack
from ddptui.core.model.stacks import blocked_at
from ddptui.rank.paths import is_library
from ddptui.rank.protocol import Frame

CPU_SAMPLE = 0.3
"""Seconds over which each rank's CPU use is measured."""
BUSY = 10.0
"""Percent of one core above which a rank is `running`; a rank blocked in a collective uses ~0."""
PARALLEL_DUMPS = 4
_STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)


@dataclass(frozen=True)
class RankView:
    """One rank at one moment: its CPU use and Python stack (innermost first; None: unknown)."""

    proc: RankProcess
    cpu: float | None
    """Percent of one core over the sample; None once the process is gone."""
    stopped: bool = False
    frames: tuple[Frame, ...] | None = None

    @property
    def phase(self) -> str:
        """`exited`, `stopped`, `running` (busy) or `waiting` (idle); `busy`/`idle` without a stack."""
        if self.cpu is None:
            return "exited"
        if self.stopped:
            return "stopped"
        busy = self.cpu >= BUSY
        if self.frames is None:
            return "busy" if busy else "idle"
        return "running" if busy else "waiting"

    def describe(self) -> str:
        """`waiting at train.py:30 in all_reduce`, `running at train.py:12`, `idle`, `exited`."""
        if not self.frames:
            return self.phase
        user, callee = blocked_at(list(self.frames))
        return self.phase + (f" at {user}" if user else "") + (f" in {callee}" if callee else "")

    def collective(self) -> tuple[str, Frame | None] | None:
        """The torch.distributed call the rank stands in, with its call site; None when elsewhere."""
        if not self.frames:
            return None
        library = list(itertools.takewhile(lambda f: is_library(f.file), self.frames))
        if not any(f.file.endswith("distributed_c10d.py") for f in library):
            return None
        user, callee = blocked_at(list(self.frames))
        return (callee or library[0].func), user


async def look(job: Job, py_spy: str | None) -> tuple[list[RankView], dict[str, list[int]]]:
    """Every rank's CPU use over CPU_SAMPLE seconds, then its stack; and why stacks are missing."""
    cpu = await _cpu_use(job.ranks)
    problems: dict[str, list[int]] = {}
    if py_spy is None:
        problems[NOT_INSTALLED] = [r.rank for r in job.ranks]
        return [RankView(r, cpu[r.pid], _stopped(r)) for r in job.ranks], problems
    limit = asyncio.Semaphore(PARALLEL_DUMPS)

    async def view(rank: RankProcess) -> RankView:
        if cpu[rank.pid] is None:
            return RankView(rank, None)
        async with limit:
            frames, problem = await _stack(py_spy, rank)
        if problem is not None and not rank.process.is_running():
            return RankView(rank, None)
        if problem is not None:
            problems.setdefault(problem, []).append(rank.rank)
        return RankView(rank, cpu[rank.pid], _stopped(rank), frames)

    return list(await asyncio.gather(*(view(rank) for rank in job.ranks))), problems


async def _stack(py_spy: str, rank: RankProcess) -> tuple[tuple[Frame, ...] | None, str | None]:
    """A rank's stack, or why it could not be read; tried twice (a busy rank's read can tear)."""
    problem = "py-spy timed out"
    for _ in range(2):
        try:
            return tuple(await read_stack(py_spy, rank.pid)), None
        except StackError as exc:
            problem = str(exc)
        except TimeoutError:
            pass
        if problem == NOT_PERMITTED:
            break
    return None, problem


async def _cpu_use(ranks: Sequence[RankProcess]) -> dict[int, float | None]:
    """Percent of one core each rank used over CPU_SAMPLE seconds; None for a rank that is gone."""
    for rank in ranks:
        with contextlib.suppress(psutil.Error):
            rank.process.cpu_percent(None)
    await asyncio.sleep(CPU_SAMPLE)
    use: dict[int, float | None] = {}
    for rank in ranks:
        try:
            alive = rank.process.is_running() and rank.process.status() != psutil.STATUS_ZOMBIE
            use[rank.pid] = rank.process.cpu_percent(None) if alive else None
        except psutil.Error:
            use[rank.pid] = None
    return use


def _stopped(rank: RankProcess) -> bool:
    """True when the rank is stopped (SIGSTOP, or held by a debugger such as gdb)."""
    try:
        return rank.process.status() in _STOPPED
    except psutil.Error:
        return False
