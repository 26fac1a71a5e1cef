"""`StallWatch`: when is a running rank `waiting`, and where.

A rank running longer than the stall timeout is only called waiting when it is idle (blocked in a
collective uses no CPU and sleeps; a rank starved of CPU or reading from disk is runnable or in
disk wait, so not idle), no running rank of the job used CPU meanwhile, and its collectives have
not moved for the stall timeout: a rank importing torch or computing is slow, not stuck, and so
are the ranks waiting for it; a rank that mostly sleeps while its collectives complete (a paced
loop, a data loader's waits) is working. A rank making progress is never called waiting, however
long it takes (batch mode's `--timeout` bounds a whole run). How far a rank's collectives have
got is asked of it (`Progress`) when it turns idle and again before it is called waiting. The
location comes from the rank's own `stack` answer, or from a faulthandler dump when its
interpreter cannot answer, refreshed every stall timeout while waiting.

One idle wait is known to end by itself: a rank that reached `init_process_group` before the
rendezvous store opened retries its connect with torch's backoff (0.5 s growing by half each try,
with jitter, up to 60 s), so after a slow rank 0 the whole job may sleep for seconds once the
store is up. A store client (any rank but 0, or every rank under torchrun's agent store) whose
innermost frame is the store's creation, while that store (as the rank tells) listens on this
machine, is still joining: it stays running, looked at again a stall timeout later.
"""

from __future__ import annotations

import asyncio
import time

from ddptui.core.model.stacks import blocked_at, joining_store, main_thread, parse_threads
from ddptui.core.model.state import Frame, Phase
from ddptui.core.session.rank import Rank
from ddptui.core.transport.interface import RequestError
from ddptui.core.transport.launch import listening
from ddptui.rank.asks import Collectives, Progress, Stack, Store

IDLE_WINDOW = 0.5
"""Seconds of CPU accounting behind an idle/busy verdict."""
IDLE_CPU = 0.2
"""Below this share of one core, a running rank counts as idle (blocked, sleeping)."""
RUNNING = (Phase.STARTING, Phase.RUNNING)


async def main_stack(rank: Rank) -> list[Frame]:
    """A running rank's main thread, innermost frame first: its own `stack` answer, else a
    faulthandler dump (empty when neither comes)."""
    transport = rank.transport
    if not transport.linked:
        return []
    try:
        threads = await transport.request(Stack(), 0.5)
    except RequestError:
        threads = ()
    for thread in threads:
        if thread.main:
            return list(reversed(thread.frames))
    return main_thread(parse_threads(await transport.stack_dump()))


WORK_RECORDS = 16
"""A rank's newest records looked at for a point-to-point op waited on (a pipeline step issues
a few at once, then waits on each)."""
COLLECTIVE_FILES = ("distributed_c10d.py", "_functional_collectives.py")
"""Where a stack names the collective a rank waits in by itself."""


def waited_op(records: object) -> str | None:
    """The point-to-point op (`irecv`) a rank's records say it waits on now: one whose work's
    `wait()` has not returned (`started`, said by ddptui's own wrapper), else None. Its stack
    cannot say so: under the user's frame stands a schedule's own function, then C code."""
    if not isinstance(records, list):
        return None
    for record in reversed(records):
        if record.get("p2p") and record.get("source") == "wrappers" and record.get("state") == "started":
            return str(record.get("op"))
    return None


async def op_waited_on(rank: Rank) -> str | None:
    """The point-to-point op a rank waits on now, as its records say (`waited_op`); None when
    it waits on none, or cannot say."""
    try:
        records = await rank.transport.request(Collectives(last=WORK_RECORDS), 0.5)
    except RequestError:
        return None
    return waited_op(records)


async def collective_progress(rank: Rank) -> int | None:
    """How far the rank's collectives have got, or None when it cannot say (not linked, no answer)."""
    if not rank.transport.linked:
        return None
    try:
        return await rank.transport.request(Progress(), 0.5)
    except RequestError:
        return None


async def joining_open_store(rank: Rank) -> bool:
    """True when the rank, standing in the store's creation, is a client of a store that listens
    on this machine (its own `store` answer says which store); False when that cannot be told."""
    try:
        store = await rank.transport.request(Store(), 0.5)
    except RequestError:
        return False
    return store is not None and store.client and await asyncio.to_thread(listening, store.host, store.port)


class StallWatch:
    """Reads the ranks' CPU samples and decides which ranks are waiting."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.progress = time.monotonic()
        """When a running rank last used CPU."""
        self._cpu: dict[int, float] = {}
        self._idle: dict[int, bool] = {}
        self._dumped: dict[int, float] = {}
        self._dumping: set[int] = set()
        self._sampled = self.progress
        self._collectives: dict[int, int | None] = {}
        """How far each idle rank's collectives had got when it turned idle, or when they last moved."""

    def sample(self, ranks: list[Rank], now: float) -> list[Rank]:
        """Read the ranks' latest CPU samples; return the ranks that were busy."""
        interval, self._sampled = now - self._sampled, now
        busy = []
        for rank in ranks:
            usage = rank.transport.activity() if self.watched(rank, now) else None
            if usage is None:
                self._cpu.pop(rank.index, None)
                self._idle.pop(rank.index, None)
                continue
            used, active = usage
            before, self._cpu[rank.index] = self._cpu.get(rank.index), used
            if before is not None and interval > 0:
                self._idle[rank.index] = not active and (used - before) / interval <= IDLE_CPU
                if not self._idle[rank.index]:
                    busy.append(rank)
                    self._collectives.pop(rank.index, None)
        if busy:
            self.progress = now
        return busy

    @staticmethod
    def watched(rank: Rank, now: float) -> bool:
        """Running or waiting; not a rank a broadcast set running a moment ago (they are many)."""
        if not rank.state.alive or rank.state.phase is Phase.PAUSED:
            return False
        return rank.state.phase is not Phase.RUNNING or now - rank.phase_since >= IDLE_WINDOW

    def unmeasured(self, ranks: list[Rank]) -> list[Rank]:
        """Idle running ranks whose collectives' progress is not known yet: to be asked (`measure`)."""
        idle = self._idle
        return [
            rank
            for rank in ranks
            if idle.get(rank.index) and rank.index not in self._collectives and rank.state.phase in RUNNING
        ]

    async def measure(self, rank: Rank) -> None:
        """Ask how far an idle rank's collectives have got (the base `mark_waiting` compares with)."""
        self._collectives[rank.index] = None  # asked: not asked again while the answer comes
        self._collectives[rank.index] = await collective_progress(rank)

    async def moved(self, rank: Rank) -> bool:
        """True when the rank's collectives moved since they were last measured (measured again now);
        the job then counts as making progress."""
        before = self._collectives.get(rank.index)
        now = await collective_progress(rank)
        self._collectives[rank.index] = now
        if before is None or now is None or now == before:
            return False
        self.progress = time.monotonic()
        return True

    def stalled(self, rank: Rank, now: float) -> bool:
        """True for a running rank that should now be called waiting."""
        if rank.state.phase not in RUNNING:
            return False
        running_for = now - rank.phase_since
        idle = self._idle.get(rank.index, False)
        return idle and min(running_for, now - self.progress) > self.timeout

    def due(self, rank: Rank, now: float) -> bool:
        """True when the rank's stack should be sampled, at most once a stall timeout: newly stalled,
        or waiting."""
        if rank.index in self._dumping or now - self._dumped.get(rank.index, 0.0) <= self.timeout:
            return False
        return rank.state.phase is Phase.WAITING or self.stalled(rank, now)

    async def place(self, rank: Rank, where: Frame | None, callee: str | None) -> None:
        """Mark a rank waiting at `where` in `callee` that all-stop found blocked there, before the
        stall timeout: how far its collectives got now is what the next look compares with, and
        that look comes a stall timeout later (an older measure would call it moved, and running)."""
        self._collectives[rank.index] = await collective_progress(rank)
        self._dumped[rank.index] = time.monotonic()
        rank.stalled(where, callee)

    async def mark_waiting(self, rank: Rank) -> None:
        """Sample the rank's stack and mark it waiting where its user code stands."""
        self._dumping.add(rank.index)
        try:
            if await self.moved(rank):  # sleeping between collectives that complete: working
                self._dumped[rank.index] = time.monotonic()  # looked at again a stall timeout later
                if rank.state.phase is Phase.WAITING:
                    rank.resumed()
                return
            frames = await main_stack(rank)
            self._dumped[rank.index] = time.monotonic()
            if joining_store(frames) and await joining_open_store(rank):
                if rank.state.phase is Phase.WAITING:
                    rank.resumed()  # still joining: looked at again a stall timeout later
                return
            where, callee = blocked_at(frames)
            if rank.transport.linked and not any(f.file.endswith(COLLECTIVE_FILES) for f in frames):
                callee = await op_waited_on(rank) or callee  # `irecv`, not the schedule's `step`
            rank.stalled(where, callee)
        finally:
            self._dumping.discard(rank.index)
