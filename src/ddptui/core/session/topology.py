"""`TopologyReader`: the job's process groups and device meshes, asked of its ranks now and then.

Groups and meshes are made once, early in a job, so a look after a rank's first prompt, after a
step now and then, and whenever a command needs them is enough; every answer adds to what is
known (a rank that has since died keeps its place in the mesh).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, Protocol, TypeVar

from ddptui.core.model.topology import Topology
from ddptui.core.session.rank import Rank
from ddptui.core.transport.interface import RequestError
from ddptui.rank import asks

R = TypeVar("R")
EVERY = 2.0
"""Seconds at least between two looks that nobody asked for."""
TIMEOUT = 2.0
"""Seconds a rank has to answer."""


class Asked(Protocol):
    """What reading the topology needs of the session (`Session` is one)."""

    ranks: list[Rank]

    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets`."""

    def ask(
        self, ask: asks.Ask[R], targets: Iterable[int], timeout: float = 2.0
    ) -> Awaitable[dict[int, R | RequestError]]:
        """Ask every target rank at once."""


class TopologyReader:
    """What is known of the job's groups and meshes, and the looks that learn more."""

    def __init__(self, session: Asked, spawn: Callable[[Coroutine[Any, Any, None]], None]) -> None:
        """`spawn` runs a background look (the session's tasks, cancelled as it closes)."""
        self._session = session
        self._spawn = spawn
        self.known = Topology()
        self.on_change: list[Callable[[Topology], None]] = []
        """Called when a look learned something new."""
        self._last = -EVERY
        self._looking = False

    async def read(self) -> Topology:
        """Ask every linked live rank now; what is known, with what they said."""
        session = self._session
        linked = [r.index for r in session.live(range(len(session.ranks))) if r.transport.linked]
        self._last = time.monotonic()
        answers = await session.ask(asks.Topology(), linked, TIMEOUT)
        learned = Topology.from_answers((a for a in answers.values() if isinstance(a, dict)), self.known)
        if learned != self.known:
            self.known = learned
            for callback in self.on_change:
                callback(learned)
        return self.known

    def soon(self) -> None:
        """Look in the background, unless a look is under way or one was made less than EVERY ago."""
        if self._looking or time.monotonic() - self._last < EVERY:
            return
        self._looking = True
        self._spawn(self._look())

    async def _look(self) -> None:
        """One background look."""
        try:
            await self.read()
        finally:
            self._looking = False
