"""`Session`: owns the ranks, their state, requests to them, and lockstep broadcasts to their debuggers
(`Lockstep`).

Ranks that connect of their own accord (wrap and listen mode) are taken in by `Arrivals`, stalled
ranks are marked waiting by the `Watchdog`, coroutines wait for its changes through `Changes`; its
start is `starting`'s and its end `teardown`'s. What went wrong is not the session's to say:
`ddptui.core.diagnosis` listens to it (`on_state`, `on_closing`, `on_release`, the lockstep's
`on_step`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import os
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

from ddptui.core.model.fatal import fatal_site
from ddptui.core.model.state import PAUSED, RUNNING, STARTING, WAITING, RankState
from ddptui.core.model.targets import Line, format_ranks, parse_line, parse_ranks
from ddptui.core.model.topology import Topology
from ddptui.core.session import starting, teardown, wrap
from ddptui.core.session.allstop import AllStop
from ddptui.core.session.arrivals import Arrivals
from ddptui.core.session.changes import Changes
from ddptui.core.session.keys import PaneKeys
from ddptui.core.session.lockstep import Broadcast, Lockstep
from ddptui.core.session.rank import Rank
from ddptui.core.session.resources import Resources
from ddptui.core.session.topology import TopologyReader
from ddptui.core.session.watchdog import Watchdog
from ddptui.core.transport import launch
from ddptui.core.transport.interface import RankTransport, RequestError
from ddptui.core.transport.local import LocalRank
from ddptui.core.transport.logs import SessionLog
from ddptui.rank.asks import Ask
from ddptui.rank.protocol import Message, StartsRanks

R = TypeVar("R")

TICK = 0.1
"""Seconds between checks for stalled ranks and overdue prompts."""


class Session:
    """A running job: N ranks, each reached through its transport, driven from one asyncio loop."""

    def __init__(self, spec: launch.LaunchSpec) -> None:
        self.spec = spec
        self.ranks: list[Rank] = []
        self.targets: frozenset[int] | None = None
        """The default broadcast target; None means every live rank."""
        self.on_output: list[Callable[[int, bytes], None]] = []
        self.on_state: list[Callable[[int, RankState], None]] = []
        self.on_notice: list[Callable[[str], None]] = []
        """Called with lines the user should see: refused connections, logging failures."""
        self.on_world: list[Callable[[int], None]] = []
        """Wrap mode: called once with the world size, right after the ranks exist (as placeholders)."""
        self.on_closing: list[Callable[[], None]] = []
        """Called once as the session begins to close, before any rank is ended."""
        self.on_restart: list[Callable[[int], None]] = []
        """Called with a rank's index when a new process takes it (its launcher restarted the job)."""
        self.on_release: list[Callable[[SessionLog], None]] = []
        """`--log-dir`: called with the session log just before it closes, to keep reports in it."""
        self.notices: list[str] = []
        self.port = 0
        self.resources = Resources()
        """The directory, link server, job, log and tasks the session opens and closes."""
        self.lockstep = Lockstep(self, TICK)
        """Broadcasts to the ranks' debuggers, and the one in flight."""
        self.keys = PaneKeys(spec.line_editing and spec.starts_ranks, self.resources.spawn)
        """Keys typed into the ranks' panes (ranks ddptui starts get readline for them)."""
        self.groups: dict[str, frozenset[int]] = {}
        """Named rank sets (`:group`), usable wherever ranks are named (`@name n`, `:ranks name`)."""
        self.mark_key = b""
        """The key of this session's marks in a rank's terminal output (`MarkReader`), set at `start`."""
        self._watchdog = Watchdog(self.ranks, self.resources, self._tick, spec.stall_timeout, TICK, self.log)
        """Marks stalled ranks waiting; once it runs, it wakes every waiter once a tick."""
        self.changes = Changes(lambda: self.ticking, TICK)
        """The coroutines waiting for a change (a rank's output or state, the watchdog's tick)."""
        self.arrivals = Arrivals(self)
        """Wrap and listen mode: the job's own launcher, and the ranks that connect."""
        self.topology_reader = TopologyReader(self, self.resources.spawn)
        """The job's process groups and device meshes, as its ranks tell them."""
        self.lockstep.on_step.append(self.topology_reader.soon)
        self.all_stop = AllStop(self, self.resources.spawn, self._watchdog.stalls.place)
        """Stops the other ranks when one stops at a breakpoint or crashes (not with `--non-stop`)."""
        if spec.all_stop:
            self.on_state.append(self.all_stop.on_state)

    @property
    def topology(self) -> Topology:
        """What is known of the job's process groups and device meshes."""
        return self.topology_reader.known

    @property
    def launcher(self) -> wrap.Launcher | None:
        """Wrap mode: the command that launches the job (None for a job ddptui spawns itself)."""
        return self.arrivals.launcher

    @property
    def address(self) -> tuple[str, int] | None:
        """`ddptui listen`: the TCP address ranks connect to."""
        return self.arrivals.address

    @property
    def listen_exports(self) -> list[str]:
        """`ddptui listen`: the `NAME=value` words that make a job's ranks connect here."""
        return self.arrivals.listen_exports

    @property
    def listen_line(self) -> str:
        """`ddptui listen`: the shell line for the job's environment (empty otherwise)."""
        return "export " + " ".join(self.listen_exports) if self.listen_exports else ""

    @property
    def state_dir(self) -> str:
        """The session's private directory (0700): socket, stack dumps."""
        return self.resources.dir

    @property
    def closing(self) -> bool:
        """True once the session began to close."""
        return self.resources.closing

    # -- start ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Open the logs and the rank link server, spawn every rank (`starting`), start the watchdog."""
        await starting.start(self)
        self.resources.spawn(self._watchdog.run())

    def open_log(self, nproc: int) -> None:
        """`--log-dir`: log every rank's output and state changes (once the world size is known)."""
        assert self.spec.log_dir is not None
        log = self.resources.log = SessionLog(self.spec.log_dir, nproc, on_failure=self.log)
        self.on_output.append(log.output)
        self.on_state.append(log.state)

    def add_rank(self, index: int, transport: RankTransport) -> None:
        """Track a rank: its output, its events, its exit."""
        rank = Rank(index, transport, self._state_changed, self.mark_key)
        self._watchdog.active.add(index)  # starting
        self.wire(rank, transport)
        rank.fatal_dump = lambda: self._fatal(rank)
        self.ranks.append(rank)

    def wire(self, rank: Rank, transport: RankTransport) -> None:
        """Route a transport's output, events and exit to `rank` (a new rank, or its next process)."""
        if isinstance(transport, LocalRank):
            transport.dump_path = os.path.join(self.resources.dir, f"stack-{rank.index}.txt")
        transport.on_output = functools.partial(self._output, rank)  # a C call: once a rank and step
        transport.on_message = functools.partial(self._message, rank)
        transport.on_exit = lambda status: self._ended(rank, status)

    def annotate(self, rank: Rank, line: str) -> None:
        """Write a line of ddptui's own into a rank's output, on a line of its own (its pane, its
        log, the transcript)."""
        fresh = not rank.output.end or rank.output.tail(1) == b"\n"
        self._received(rank, b"\x1b[0m" + (b"" if fresh else b"\r\n") + line.encode() + b"\r\n")

    def _message(self, rank: Rank, message: Message) -> None:
        """An event from a rank's link: the rank's, except a launcher started inside it (said once)."""
        if isinstance(message, StartsRanks):
            advice = wrap.spawn_advice(self.spec, message.launcher)
            if advice not in self.notices:
                self.log(advice)
            return
        rank.on_message(message)

    def _fatal(self, rank: Rank) -> str | None:
        """Show the stack a rank dumped as it died of a fatal signal; say where it died."""
        try:
            with open(os.path.join(self.resources.dir, f"fatal-{rank.index}.txt"), errors="replace") as dump:
                text = dump.read()
        except OSError:
            return None
        if not text:
            return None
        self._output(rank, text.replace("\n", "\r\n").encode())
        return fatal_site(text)

    def log(self, line: str) -> None:
        """Tell the user (and the session log) something about the session itself."""
        self.notices.append(line)
        for callback in self.on_notice:
            callback(line)

    # -- I/O callbacks ----------------------------------------------------------------------
    def _output(self, rank: Rank, data: bytes) -> None:
        """Take the events out of a rank's output (see `MarkReader`), hand on the rest, then the
        events: a `paused` comes with the prompt it announces, which is then on record when the
        event is handled (a broadcast sees the rank back at the first look, not the second)."""
        data, events = rank.marks.feed(data)
        if data:
            self._received(rank, data)
        for event in events:  # a `Paused`, the one event said in a terminal
            rank.on_message(event)

    def _ended(self, rank: Rank, status: int) -> None:
        """A rank's process is gone: what its output held back is output after all, then the exit."""
        held = rank.marks.flush()
        if held:
            self._received(rank, held)
        rank.on_exit(status)

    def _received(self, rank: Rank, data: bytes) -> None:
        """Record a rank's output and hand it to the front ends."""
        rank.received(data)
        self.lockstep.touch(rank.index)
        for callback in self.on_output:
            callback(rank.index, data)
        if self.changes.waiters:
            self.changes.notify()

    def _state_changed(self, rank: Rank) -> None:
        """Tell the watchdog and the front ends (and whoever listens: `on_state`), wake the waiters."""
        index, state = rank.index, rank.state
        self.lockstep.touch(index)
        phase, code = state.phase, state.exit_code
        # `state.active` (the watchdog's to look at), spelt out: twice a rank a lockstep step
        if code is None and (phase is RUNNING or phase is WAITING or phase is STARTING):
            self._watchdog.active.add(index)
        else:
            self._watchdog.active.discard(index)
            if phase is PAUSED and rank.paused_count == 1:  # a first prompt: the groups exist by now
                self.topology_reader.soon()
        for callback in self.on_state:
            callback(index, state)
        if self.changes.waiters:
            self.changes.notify()

    @property
    def watched(self) -> bool:
        """True while a rank is starting, running or waiting: one the watchdog looks at."""
        return bool(self._watchdog.active)

    @property
    def ticking(self) -> bool:
        """True while the watchdog ticks: it wakes the session's waiters once a tick."""
        return self._watchdog.ticking

    def notify(self) -> None:
        """Wake every coroutine waiting for a change."""
        self.changes.notify()

    async def wait_until(self, condition: Callable[[], bool], timeout: float | None = None) -> bool:
        """Wait until `condition()` holds; False if `timeout` passed first."""
        return await self.changes.wait_until(condition, timeout)

    # -- input ------------------------------------------------------------------------------
    def send_input(self, index: int, data: bytes) -> None:
        """Type bytes into one rank's terminal (keystrokes from its pane; see `PaneKeys`)."""
        self.keys.send(self.ranks[index], data)

    def resize(self, index: int, columns: int, lines: int) -> None:
        """Set a rank's terminal size."""
        self.ranks[index].transport.resize(columns, lines)

    # -- requests ---------------------------------------------------------------------------
    async def ask(
        self, ask: Ask[R], targets: Iterable[int], timeout: float = 2.0
    ) -> dict[int, R | RequestError]:
        """Ask every target rank at once; each gets its reply, or the error saying why there is none."""

        async def one(rank: Rank) -> R | RequestError:
            try:
                return await rank.transport.request(ask, timeout)
            except RequestError as exc:
                return exc

        ranks = [self.ranks[index] for index in targets]
        answers = await asyncio.gather(*(one(rank) for rank in ranks))
        return {rank.index: answer for rank, answer in zip(ranks, answers, strict=True)}

    # -- lockstep ---------------------------------------------------------------------------
    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets` (default: the session's target set)."""
        wanted = self.targets if targets is None else frozenset(targets)
        return [
            r
            for r in self.ranks
            if r.state.exit_code is None
            and not (r.transport.dials_in and wrap.absent(r))  # the flag first: a call less a rank
            and (wanted is None or r.index in wanted)
        ]

    def all_settled(self, ranks: Iterable[Rank]) -> bool:
        """True when each rank is at its prompt, waiting (stalled) or gone."""
        now = time.monotonic()
        return all(rank.settled(now) for rank in ranks)

    async def wait_settled(self, targets: Iterable[int] | None = None) -> None:
        """Wait until every targeted live rank is paused, stalled, or gone, and all-stop has done
        stopping the others (never forever)."""
        ranks = self.live(targets)
        await self.wait_until(lambda: self.all_settled(ranks) and not self.all_stop.stopping)

    async def broadcast(
        self,
        command: str,
        targets: Iterable[int] | None = None,
        on_sent: Callable[[Broadcast], None] | None = None,
    ) -> Broadcast:
        """Send `command` to every targeted rank at a prompt and wait until each is back (see `Lockstep`)."""
        return await self.lockstep.broadcast(command, targets, on_sent)

    async def replace_waiting(self) -> None:
        """Place the waiting ranks again: the ranks just stepped may have released them, and a
        state must not say `in barrier` of a rank that has moved on to wait elsewhere."""
        await self._watchdog.replace_waiting()

    def set_targets(self, spec: str) -> str:
        """`:ranks 0,2-3` / `:ranks all`: set the default target; returns a line for the user."""
        if spec.strip():
            ranks = parse_ranks(spec, len(self.ranks), self.groups, self.topology.select)
            self.targets = None if len(ranks) == len(self.ranks) else ranks
        return f"target ranks: {'all' if self.targets is None else format_ranks(self.targets)}"

    def default_pump(self, pump: bool) -> None:
        """Whether to drain the ranks' terminals through a pump process, unless the launch spec
        chose already (a front end's default, before `start`)."""
        if self.spec.pump is None:
            self.spec = dataclasses.replace(self.spec, pump=pump)

    def set_group(self, name: str, ranks: frozenset[int]) -> None:
        """`:group NAME RANKS`: name a rank set, usable wherever ranks are named."""
        self.groups[name] = ranks

    def parse(self, line: str) -> Line:
        """Classify a typed line (see `targets.parse_line`)."""
        return parse_line(line, len(self.ranks), self.groups, self.topology.select)

    # -- teardown ---------------------------------------------------------------------------
    async def close(self, grace: float = 0.5) -> None:
        """End every rank and everything it started, then remove the session's files."""
        await teardown.close(self, grace)

    def kill_now(self) -> None:
        """Synchronous last resort when the event loop is gone: kill everything, remove files."""
        teardown.kill_now(self)

    def _tick(self) -> None:
        """The watchdog's tick: wake the waiters, and the broadcast in flight looks again."""
        self.notify()
        self.lockstep.look()


__all__ = ["Session"]
