"""`StallWatch`: when is a running rank `waiting`, and where.

A rank running longer than the stall timeout is only called waiting when it is idle (blocked in a
collective uses no CPU and sleeps; a rank starved of CPU or reading from disk is runnable or in
disk wait, so not idle) and no running rank of the job used CPU meanwhile: a rank importing torch
or computing is slow, not stuck, and so are the ranks waiting for it. A rank that stays busy for
BUSY_FACTOR stall timeouts is called waiting anyway, so a spinning rank cannot hold up a batch. The
location comes from a faulthandler dump (SIGUSR1), refreshed every stall timeout while waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time

from ddptui.core import proctable
from ddptui.core.rank import Rank
from ddptui.core.stacks import waiting_point
from ddptui.core.state import Phase

IDLE_WINDOW = 0.5
"""Seconds of CPU accounting behind an idle/busy verdict."""
IDLE_CPU = 0.2
"""Below this share of one core, a running rank counts as idle (blocked, sleeping)."""
BUSY_FACTOR = 10
"""A rank busy on CPU is called waiting only after this many stall timeouts."""
RUNNING = (Phase.STARTING, Phase.RUNNING)


class StallWatch:
    """Samples the ranks' CPU and decides which ranks are waiting."""

    def __init__(self, timeout: float, state_dir: str) -> None:
        self.timeout = timeout
        self.state_dir = state_dir
        self.progress = time.monotonic()
        """When a running rank last used CPU."""
        self._sampled = self.progress
        self._cpu: dict[int, float] = {}
        self._idle: dict[int, bool] = {}
        self._dumped: dict[int, float] = {}
        self._dumping: set[int] = set()

    def sample(self, ranks: list[Rank], now: float) -> list[Rank]:
        """Every IDLE_WINDOW, read the ranks' CPU time; return the ranks that were busy."""
        if now - self._sampled < IDLE_WINDOW:
            return []
        interval, self._sampled = now - self._sampled, now
        watched = {rank.pid: rank for rank in ranks if self._watched(rank, now)}
        for rank in ranks:
            if rank.pid not in watched:
                self._cpu.pop(rank.index, None)
                self._idle.pop(rank.index, None)
        usage = proctable.tree_usage(proctable.scan(), set(watched)) if watched else {}
        busy = []
        for pid, rank in watched.items():
            used, active = usage[pid]
            before, self._cpu[rank.index] = self._cpu.get(rank.index), used
            if before is not None:
                self._idle[rank.index] = not active and (used - before) / interval <= IDLE_CPU
                if not self._idle[rank.index]:
                    busy.append(rank)
        if busy:
            self.progress = now
        return busy

    @staticmethod
    def _watched(rank: Rank, now: float) -> bool:
        """Running or waiting; not a rank a broadcast set running a moment ago (they are many)."""
        if not rank.state.alive or rank.state.phase is Phase.PAUSED:
            return False
        return rank.state.phase is not Phase.RUNNING or now - rank.phase_since >= IDLE_WINDOW

    def stalled(self, rank: Rank, now: float) -> bool:
        """True for a running rank that should now be called waiting."""
        if rank.state.phase not in RUNNING:
            return False
        running_for = now - rank.phase_since
        if running_for > BUSY_FACTOR * self.timeout:
            return True
        idle = self._idle.get(rank.index, False)
        return idle and min(running_for, now - self.progress) > self.timeout

    def due(self, rank: Rank, now: float) -> bool:
        """True when the rank's stack should be dumped: newly stalled, or waiting and stale."""
        if rank.index in self._dumping:
            return False
        if rank.state.phase is Phase.WAITING:
            return now - self._dumped.get(rank.index, 0.0) > self.timeout
        return self.stalled(rank, now)

    async def mark_waiting(self, rank: Rank) -> None:
        """Dump the rank's stack and mark it waiting where its user code stands."""
        self._dumping.add(rank.index)
        try:
            dump = await self.stack_dump(rank) if rank.hello else ""
            self._dumped[rank.index] = time.monotonic()
            location, callee = waiting_point(dump)
            if rank.state.phase in (*RUNNING, Phase.WAITING):
                state = rank.state.evolve(phase=Phase.WAITING, location=location, waiting_in=callee)
                if state != rank.state:
                    rank.set_state(state)
        finally:
            self._dumping.discard(rank.index)

    async def stack_dump(self, rank: Rank, timeout: float = 1.0) -> str:
        """Every thread's Python stack of a running rank, via faulthandler on SIGUSR1."""
        path = os.path.join(self.state_dir, f"stack-{rank.index}.txt")
        with contextlib.suppress(OSError):
            os.truncate(path, 0)
            os.kill(rank.pid, signal.SIGUSR1)
        deadline, last = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            try:
                with open(path, errors="replace") as dump:
                    text = dump.read()
            except OSError:
                return ""
            if text and text == last:
                return text
            last = text
        return last
