"""`Lockstep`: one command at a time to the ranks' debuggers, and the wait until each is back.

A broadcast writes its line to every targeted rank at a prompt before any of them is looked at
again, so the ranks start together; the next broadcast waits until each rank is back at its
prompt, stalled (waiting in a collective, say) or gone. That is what keeps ranks reaching each
collective together instead of deadlocking.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from ddptui.core.model.state import PAUSED, RUNNING, Frame, Phase, RankState
from ddptui.core.model.targets import EXECUTION_COMMANDS, format_ranks
from ddptui.core.session.keys import CLEAR_LINE, PaneKeys
from ddptui.core.session.rank import Rank


class Stepped(Protocol):
    """What a broadcast needs of the session (`Session` is one)."""

    ranks: list[Rank]
    keys: PaneKeys

    @property
    def watched(self) -> bool:
        """True while a rank is starting, running or waiting."""

    @property
    def ticking(self) -> bool:
        """True while the watchdog ticks (and so wakes the broadcast once a tick)."""

    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets`."""

    def all_settled(self, ranks: Iterable[Rank]) -> bool:
        """True when each rank is at its prompt, waiting or gone."""

    def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> Awaitable[bool]:
        """Wait until `condition()` holds; False if `timeout` passed first."""

    def replace_waiting(self) -> Awaitable[None]:
        """Place the waiting ranks again."""


@dataclass
class Answer:
    """What one rank printed for a broadcast command, and where it ended up."""

    rank: int
    output: bytes
    state: RankState


@dataclass
class Broadcast:
    """The result of sending one command to a set of ranks in lockstep."""

    command: str
    replies: list[Answer] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    """Targeted ranks that were not at a prompt, with their state in words."""
    cleared: dict[int, str] = field(default_factory=dict)
    """Ranks whose pane held a half-typed line, emptied before the command: what it read."""
    held: dict[int, str] = field(default_factory=dict)
    """Targeted ranks at a prompt whose resume is held (`Lockstep.hold`), with why."""

    def cleared_lines(self) -> list[str]:
        """A line for each rank whose half-typed line was emptied to send the command."""
        return [  # keys that read as nothing (Up) still left readline's recalled line
            f"rank {i}: cleared {repr(typed) if typed else 'a line'}, typed in its pane without Enter, "
            f"to send {self.command}"
            for i, typed in self.cleared.items()
        ]


class Lockstep:
    """The session's broadcasts: one in flight at a time, and which ranks it still waits for."""

    def __init__(self, session: Stepped, look_every: float) -> None:
        """`look_every`: seconds between looks at every rank a broadcast waits for (a prompt can
        become overdue without a sound); in between, a rank is looked at when it printed or
        changed state (`touch`)."""
        self._session = session
        self._look_every = look_every
        self._turns = Turns()
        self.command = ""
        """The command being broadcast, or empty."""
        self._out: set[int] = set()
        """Ranks the broadcast in flight still waits for."""
        self._start: dict[int, tuple[int, int]] = {}
        """Each sent rank's output end and `paused` count when the command went out."""
        self._all_back: asyncio.Future[None] | None = None
        """Resolved by `touch` once the last rank is back: the broadcast wakes once a step, not
        once for every pass of the loop that brought a rank's output."""
        self.on_running: list[Callable[[], None]] = []
        """Called once a broadcast's command is on its way to the ranks: a front end's work that
        can be done while they run (`--batch` prints the last step's answers then)."""
        self.on_step: list[Callable[[], None]] = []
        """Called after each execution command (`n`, `s`, `c`, ...) once every rank is back: a
        mismatched collective shows at the step that issued it."""
        self._holds: dict[int, tuple[int, str]] = {}
        """Ranks whose resume is held, each with its `paused` count when held and why."""

    @property
    def outstanding(self) -> frozenset[int]:
        """Ranks the broadcast in flight still waits for (a copy: the views read it once a frame)."""
        return frozenset(self._out)

    def touch(self, index: int) -> None:
        """A rank printed or changed state: if the broadcast waits for it, is it back? (One rank's
        check, whatever the number of ranks.)"""
        out = self._out
        if index not in out:
            return
        rank = self._session.ranks[index]
        if rank.state.phase is RUNNING and rank.state.exit_code is None:
            return  # its output coming in: not back (the `paused` follows it)
        if self._returned(rank, self._start[index][1], time.monotonic()):
            out.discard(index)
            if not out and self._all_back is not None:
                wake(self._all_back)

    async def broadcast(
        self,
        command: str,
        targets: Iterable[int] | None = None,
        on_sent: Callable[[Broadcast], None] | None = None,
    ) -> Broadcast:
        """Send `command` at once to every targeted rank at a prompt; wait until each is back.

        The next broadcast waits for this one. A rank that does not return within the stall
        timeout is reported `waiting` with its stack location, and the broadcast ends without it.
        `on_sent` is called once the command went out, with the result so far (the ranks it was
        not sent to, the typed lines it cleared; no replies yet).
        """
        if not command.strip() or "\n" in command or "\r" in command:
            raise ValueError("a broadcast is one non-empty line (an empty line repeats pdb's last command)")
        session = self._session
        turns = self._turns
        if not turns.take():
            await turns.wait()
        try:
            ranks = session.live(targets)
            if not session.all_settled(ranks):  # nearly always settled: no waiter made
                await session.wait_until(lambda: session.all_settled(ranks))
            result = Broadcast(command)
            executes = command.split()[0] in EXECUTION_COMMANDS
            ready: list[Rank] = []
            for rank in ranks:
                if rank.state.phase is not PAUSED:
                    result.skipped[rank.index] = rank.state.describe()
                elif executes and self._holds and (why := self.held(rank)):
                    result.held[rank.index] = why
                else:
                    ready.append(rank)
            start = {r.index: (r.output.end, r.paused_count) for r in ready}
            self.command = command
            line = command.encode() + b"\r"
            if session.keys.typing:  # keys typed in a pane without Enter: the command would add to them
                cleared = {r.index: session.keys.abandon(r.index) for r in ready}
                result.cleared = {i: text for i, text in cleared.items() if text is not None}
            for rank in ready:  # before the writes: once a rank is sent its line, this process gets
                rank.resumed()  # out of its way (the kernel often wakes it on the core that wrote)
            self._start, self._out = start, set(start)  # running now: none is back yet
            for rank in ready:  # all writes together: the ranks start at the same moment
                rank.write(CLEAR_LINE + line if rank.index in result.cleared else line)
            try:
                if on_sent is not None:
                    on_sent(result)
                for hook in self.on_running:
                    hook()
                await self._wait_back()
            finally:
                self._out, self._all_back, self.command = set(), None, ""
            result.replies = [Answer(r.index, r.output.since(start[r.index][0]), r.state) for r in ready]
            if executes:
                if session.watched:  # after a step, nearly always none: every rank is back at a prompt
                    await session.replace_waiting()
                for hook in self.on_step:
                    hook()
            return result
        finally:
            turns.done()

    def hold(self, index: int, why: str, paused_count: int) -> None:
        """Send rank `index` no command that resumes it (`n`, `c`, ...) until it says `paused`
        again (once more than `paused_count` times: its count when ddptui asked), leaves its
        prompt, or `unhold`: something ddptui asked of it still runs there."""
        self._holds[index] = (paused_count, why)

    def unhold(self, targets: Iterable[int] | None = None) -> None:
        """Lift the hold on the targeted ranks (`!c`: the user sends anyway; or what held them ended)."""
        if not self._holds:  # nearly always: asked after every evaluation
            return
        for rank in self._session.live(targets):
            self._holds.pop(rank.index, None)

    def held(self, rank: Rank) -> str:
        """Why the rank's resume is held; empty when it is not (any more)."""
        count, why = self._holds.get(rank.index, (0, ""))
        if why and (rank.paused_count > count or rank.state.phase is not PAUSED):
            del self._holds[rank.index]
            return ""
        return why

    def look(self) -> None:
        """The watchdog's tick: look again at every rank the broadcast in flight waits for."""
        if self._all_back is not None:
            wake(self._all_back)

    async def _wait_back(self) -> None:
        """Wait until every rank sent the command is back (see `touch`); look at all of them every
        `look_every` seconds too: a prompt can become overdue, or a rank stalled, without a sound.
        (The watchdog's tick is that look while it ticks: no timer of its own to set and cancel
        every step.)"""
        loop = asyncio.get_running_loop()
        while self._out:
            back = self._all_back = loop.create_future()
            if self._session.ticking:
                await back
            else:
                timer = loop.call_later(self._look_every, wake, back)
                try:
                    await back
                finally:
                    timer.cancel()
            now = time.monotonic()
            ranks = self._session.ranks
            self._out -= {i for i in self._out if self._returned(ranks[i], self._start[i][1], now)}

    @staticmethod
    def _returned(rank: Rank, paused_count: int, now: float) -> bool:
        """True when a rank sent a command is back at its prompt, stalled, or gone."""
        if rank.state.phase is PAUSED:
            return rank.paused_count > paused_count and rank.settled(now)
        return rank.settled(now)

    def divergence(self, targets: Iterable[int] | None = None) -> str:
        """Where the targeted paused ranks stand, when that is not one place; empty otherwise.

        Ranks in post-mortem do not count: they cannot step, wherever they stand.
        """
        places: dict[tuple[str, int], tuple[Frame, set[int]]] = {}
        for rank in self._session.live(targets):
            state = rank.state
            where = state.location
            if state.phase is Phase.PAUSED and not state.post_mortem and where is not None:
                # by file and line, not by their words: asked before every step, of every rank
                places.setdefault((where.file, where.line), (where, set()))[1].add(rank.index)
        if len(places) < 2:
            return ""
        return " · ".join(f"{format_ranks(ranks)} at {where}" for where, ranks in places.values())


class Turns:
    """One broadcast at a time, first come first served, as an `asyncio.Lock` would, but without
    a coroutine made while no broadcast is in flight (nearly always: a lock would make two a
    broadcast, paid on every step, a 1-rank job's too).

    `if not turns.take(): await turns.wait()`, then `turns.done()` once finished.
    """

    def __init__(self) -> None:
        self.busy = False
        """True while a broadcast has the turn."""
        self._waiting: deque[asyncio.Future[None]] = deque()

    def take(self) -> bool:
        """Take the turn if no broadcast has it (True); else the caller awaits `wait`."""
        if self.busy:
            return False
        self.busy = True
        return True

    async def wait(self) -> None:
        """Wait until the broadcasts before this one are done; return with the turn taken."""
        waiter = asyncio.get_running_loop().create_future()
        self._waiting.append(waiter)
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.done()  # handed the turn as the task was cancelled: hand it on
            raise
        finally:
            if waiter in self._waiting:
                self._waiting.remove(waiter)

    def done(self) -> None:
        """Hand the turn to the first broadcast still waiting, else free it."""
        while self._waiting:
            waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self.busy = False


def wake(waiter: asyncio.Future[None]) -> None:
    """Complete a waiter unless it is already done (or cancelled)."""
    if not waiter.done():
        waiter.set_result(None)
