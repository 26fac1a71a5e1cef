"""`Changes`: coroutines that wait for a session to change, and the wake-up that every change is.

A rank's output, a rank's new state and the watchdog's tick each wake every waiter once; a waiter
looks again at what it waits for (`wait_until`). One list of futures, not a condition per waiter:
a lockstep step wakes a broadcast on each of its ranks' answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from ddptui.core.session.lockstep import wake


class Changes:
    """The session's waiters, woken together by `notify`."""

    def __init__(self, ticking: Callable[[], bool], tick: float) -> None:
        """`ticking` says whether the watchdog wakes the waiters once a `tick` (seconds) already."""
        self._ticking = ticking
        self._tick = tick
        self.waiters: list[asyncio.Future[None]] = []
        """Futures of the coroutines waiting for a change (empty: nothing to wake)."""

    def notify(self) -> None:
        """Wake every coroutine waiting for a change."""
        if not self.waiters:
            return
        waiters, self.waiters = self.waiters, []
        for waiter in waiters:
            wake(waiter)

    async def _changed_or_tick(self) -> None:
        """Wait for any change, or at most one tick (the watchdog's, once it runs: no timer of
        its own, which a lockstep step would set and cancel on every wake-up)."""
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()
        self.waiters.append(waiter)
        if self._ticking():
            await waiter
            return
        timer = loop.call_later(self._tick, wake, waiter)
        try:
            await waiter
        finally:
            timer.cancel()

    async def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `condition()` holds; False if `timeout` passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not condition():
            if deadline is not None and time.monotonic() > deadline:
                return False
            await self._changed_or_tick()
        return True
