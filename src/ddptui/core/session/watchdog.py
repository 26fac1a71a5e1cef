"""`Watchdog`: the session's loop that marks stalled ranks waiting, and wakes its waiters once a tick.

Not the reaper process (`reaper`), which ends the ranks if ddptui itself dies: this one runs on the
session's event loop for as long as the session does. It looks only at the ranks starting, running
or waiting (none while every rank is paused); `StallWatch` judges when such a rank is waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ddptui.core.model.state import Phase
from ddptui.core.session.rank import Rank
from ddptui.core.session.resources import Resources
from ddptui.core.session.stalls import IDLE_WINDOW, StallWatch
from ddptui.core.transport.linked import LinkedRank

ADOPT_EVERY = 1.0
"""Seconds between looks for orphans of the ranks' trees that ddptui took in (see `LocalJob.adopt`)."""
PUMP_STOPPED = "output stalled: ddptui's pty pump is stopped (SIGCONT it to go on)"
"""Said once when the pump stops draining the ranks' terminals: their ranks block where they print."""
PUMP_RESUMED = "output flows again: ddptui's pty pump runs"
"""Said once when a stopped pump runs again."""


class Watchdog:
    """The session's stall checks, every `tick` seconds while the session is open."""

    def __init__(
        self,
        ranks: list[Rank],
        resources: Resources,
        wake: Callable[[], None],
        stall_timeout: float,
        tick: float,
        say: Callable[[str], None],
    ) -> None:
        """`ranks` is the session's own list (ranks that arrive later are in it); `wake` wakes the
        session's waiters and its broadcast in flight; `say` tells the user (a stopped pump)."""
        self._ranks = ranks
        self._resources = resources
        self._wake = wake
        self._tick = tick
        self.stalls = StallWatch(stall_timeout)
        self.ticking = False
        """True while the watchdog runs: it wakes every waiter once a tick."""
        self.active: set[int] = set()
        """Ranks starting, running or waiting: the ones the watchdog looks at (none while all pause)."""
        self._say = say
        self._pump_stopped = False

    async def run(self) -> None:
        """Mark stalled ranks waiting (see `StallWatch`); a waiting rank using CPU runs again."""
        resources, ranks = self._resources, self._ranks
        sampled = adopted = 0.0
        self.ticking = True
        try:
            while not resources.closing:
                now = time.monotonic()
                if now - adopted >= ADOPT_EVERY and resources.job is not None:
                    adopted = now
                    await asyncio.to_thread(resources.job.adopt)
                active = [ranks[i] for i in self.active]  # none while every rank is paused
                if now - sampled >= IDLE_WINDOW and active:
                    sampled = now
                    if any(self.stalls.watched(rank, now) for rank in active):
                        await self._scan()
                    for rank in self.stalls.sample(ranks, time.monotonic()):
                        rank.resumed()
                    for rank in self.stalls.unmeasured(active):
                        resources.spawn(self.stalls.measure(rank))
                self._check_pump()
                for rank in active:
                    if self.stalls.due(rank, now):
                        resources.spawn(self.stalls.mark_waiting(rank))
                self._wake()
                await asyncio.sleep(self._tick)
        finally:
            self.ticking = False
            self._wake()  # a broadcast waiting on the ticks keeps time on its own now

    def _check_pump(self) -> None:
        """Say once when the pty pump is stopped and once when it runs again: its ranks look
        waiting where they print, and nothing else would say why."""
        job = self._resources.job
        pump = job.pump if job is not None else None
        stopped = pump is not None and pump.alive and pump.stopped()
        if stopped != self._pump_stopped:
            self._pump_stopped = stopped
            self._say(PUMP_STOPPED if stopped else PUMP_RESUMED)

    async def _scan(self) -> None:
        """Sample the process table on a thread (never on the loop); meanwhile the waiters keep
        time with timers of their own, as this scan can outlast a tick."""
        self.ticking = False
        self._wake()
        try:
            await asyncio.to_thread(self._sample)
        finally:
            self.ticking = True

    def _sample(self) -> None:
        """CPU samples of every rank's process tree, spawned or linked (blocking)."""
        job = self._resources.job
        assert job is not None
        job.sample()
        for rank in self._ranks:
            if isinstance(rank.transport, LinkedRank):
                rank.transport.sample()

    async def replace_waiting(self) -> None:
        """Place the waiting ranks again: the ranks just stepped may have released them, and a
        state must not say `in barrier` of a rank that has moved on to wait elsewhere."""
        ranks = self._ranks  # the active ones only: after a step, usually none
        waiting = [ranks[i] for i in self.active if ranks[i].state.phase is Phase.WAITING]
        if waiting:
            await asyncio.gather(*(self.stalls.mark_waiting(rank) for rank in waiting))
