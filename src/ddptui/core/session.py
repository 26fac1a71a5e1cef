"""`Session`: owns the rank processes, their state, and lockstep broadcasts to their debuggers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass, field
from typing import Any

from ptyprocess import PtyProcess

from ddptui.core import launch, reaper
from ddptui.core.channel import ChannelServer, Event
from ddptui.core.logs import SessionLog
from ddptui.core.rank import Rank
from ddptui.core.stalls import StallWatch
from ddptui.core.state import Phase, RankState
from ddptui.core.targets import Line, format_ranks, parse_line, parse_ranks

TICK = 0.1
"""Seconds between checks for stalled ranks and overdue prompts."""


@dataclass
class Reply:
    """What one rank printed for a broadcast command, and where it ended up."""

    rank: int
    output: bytes
    state: RankState


@dataclass
class Broadcast:
    """The result of sending one command to a set of ranks in lockstep."""

    command: str
    replies: list[Reply] = field(default_factory=list)
    skipped: dict[int, str] = field(default_factory=dict)
    """Targeted ranks that were not at a prompt, with their state in words."""


def _resolve(waiter: asyncio.Future[None]) -> None:
    """Complete a waiter unless it is already done (or cancelled)."""
    if not waiter.done():
        waiter.set_result(None)


class Session:
    """A running job: N ranks, each in its own pty, driven from one asyncio loop."""

    def __init__(self, spec: launch.LaunchSpec) -> None:
        self.spec = spec
        self.ranks: list[Rank] = []
        self._by_pid: dict[int, Rank] = {}
        self.targets: frozenset[int] | None = None
        """The default broadcast target; None means every live rank."""
        self.on_output: list[Callable[[int, bytes], None]] = []
        self.on_state: list[Callable[[int, RankState], None]] = []
        self.port = 0
        self._dir = ""
        self._server: ChannelServer | None = None
        self._reaper: subprocess.Popen[bytes] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed: list[asyncio.Future[None]] = []
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()
        self._closing = False
        self._stalls: StallWatch | None = None
        self._log: SessionLog | None = None
        self.outstanding: frozenset[int] = frozenset()
        """Ranks the broadcast in flight still waits for."""
        self.in_flight_command = ""
        """The command being broadcast, or empty."""

    # -- start ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Create the side channel and the watchdog, then spawn every rank."""
        spec = self.spec
        if spec.master_port is not None:
            launch.check_port(spec.master_addr, spec.master_port)
        self.port = spec.master_port or launch.free_port(spec.master_addr)
        self._loop = asyncio.get_running_loop()
        if spec.log_dir:
            self._log = SessionLog(spec.log_dir, spec.nproc)
            self.on_output.append(self._log.output)
            self.on_state.append(self._log.state)
        self._dir = tempfile.mkdtemp(prefix="ddptui-")
        self._stalls = StallWatch(spec.stall_timeout, self._dir)
        self._start_reaper()
        self._server = ChannelServer(os.path.join(self._dir, "channel.sock"), self._on_event)
        await self._server.start()
        run_id = launch.new_run_id()
        for index in range(spec.nproc):
            env = launch.rank_env(spec, index, self.port, run_id, self._server.path, self._dir)
            self._add_rank(index, launch.spawn(spec, env))
        self._spawn_task(self._watch())

    def _start_reaper(self) -> None:
        """Start the watchdog that cleans up if this process dies without closing the session."""
        env = dict(os.environ, PYTHONPATH=launch.python_path(os.environ.get("PYTHONPATH")) or "")
        self._reaper = subprocess.Popen(
            [sys.executable, "-m", "ddptui.core.reaper"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        self._tell_reaper(f"dir {self._dir}")

    def _tell_reaper(self, line: str) -> None:
        """Send one line to the watchdog."""
        assert self._reaper is not None and self._reaper.stdin is not None
        self._reaper.stdin.write(line.encode() + b"\n")
        self._reaper.stdin.flush()

    def _add_rank(self, index: int, proc: PtyProcess) -> None:
        """Track a spawned rank: its pty output and its exit."""
        assert self._loop is not None
        rank = Rank(index, proc, self._state_changed)
        self.ranks.append(rank)
        self._by_pid[rank.pid] = rank
        self._tell_reaper(f"pid {rank.pid}")
        self._loop.add_reader(rank.fd, self._drain, rank)
        pidfd = os.pidfd_open(rank.pid)
        self._loop.add_reader(pidfd, self._reap, rank, pidfd)

    # -- I/O callbacks ----------------------------------------------------------------------
    def _drain(self, rank: Rank) -> None:
        """Read a pty as fast as it fills: a slow UI must never block a rank's writes."""
        data = rank.read()
        if rank.closed and self._loop is not None:
            self._loop.remove_reader(rank.fd)
        if data:
            if rank.state.phase is Phase.WAITING:
                rank.set_state(rank.state.evolve(phase=Phase.RUNNING))
            for callback in self.on_output:
                callback(rank.index, data)
            self._notify()

    def _reap(self, rank: Rank, pidfd: int) -> None:
        """Collect a rank's exit status once its process is gone."""
        assert self._loop is not None
        try:
            pid, status = os.waitpid(rank.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = rank.pid, 255 << 8
        if pid == 0:
            return
        self._loop.remove_reader(pidfd)
        os.close(pidfd)
        rank.proc.terminated = True
        rank.proc.exitstatus = status
        while not rank.closed and rank.read():
            pass
        self._drain(rank)
        rank.on_exit(os.waitstatus_to_exitcode(status))

    def _on_event(self, event: Event) -> None:
        """Route a side-channel event to its rank (events from forked children are ignored)."""
        pid = event.get("pid")
        rank = self._by_pid.get(pid) if isinstance(pid, int) else None
        if rank is not None:
            if event.get("ev") == "hello":
                rank.hello = True
            rank.on_event(event)

    def _state_changed(self, rank: Rank) -> None:
        """Tell the front ends, wake the waiters."""
        for callback in self.on_state:
            callback(rank.index, rank.state)
        self._notify()

    def _notify(self) -> None:
        """Wake every coroutine waiting for a change."""
        waiters, self._changed = self._changed, []
        for waiter in waiters:
            _resolve(waiter)

    async def _changed_or_tick(self) -> None:
        """Wait for any change, or at most one tick."""
        assert self._loop is not None
        waiter = self._loop.create_future()
        self._changed.append(waiter)
        timer = self._loop.call_later(TICK, _resolve, waiter)
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

    # -- stalls -----------------------------------------------------------------------------
    async def _watch(self) -> None:
        """Mark stalled ranks waiting (see `StallWatch`); a waiting rank using CPU runs again."""
        assert self._stalls is not None
        while not self._closing:
            now = time.monotonic()
            for rank in self._stalls.sample(self.ranks, now):
                if rank.state.phase is Phase.WAITING:
                    rank.set_state(rank.state.evolve(phase=Phase.RUNNING))
            for rank in self.ranks:
                if self._stalls.due(rank, now):
                    self._spawn_task(self._stalls.mark_waiting(rank))
            self._notify()
            await asyncio.sleep(TICK)

    # -- input ------------------------------------------------------------------------------
    def send_input(self, index: int, data: bytes) -> None:
        """Type bytes into one rank's terminal (keystrokes from its pane)."""
        rank = self.ranks[index]
        rank.write(data)
        if rank.flush() and self._loop is not None:
            self._loop.add_writer(rank.fd, self._flush_later, rank)

    def _flush_later(self, rank: Rank) -> None:
        """Write queued input once the pty accepts it."""
        if not rank.flush() and self._loop is not None:
            self._loop.remove_writer(rank.fd)

    def resize(self, index: int, columns: int, lines: int) -> None:
        """Set a rank's terminal size (TIOCSWINSZ; the rank gets SIGWINCH)."""
        rank = self.ranks[index]
        if not rank.closed:
            with contextlib.suppress(OSError):
                rank.proc.setwinsize(lines, columns)

    # -- lockstep ---------------------------------------------------------------------------
    def live(self, targets: Iterable[int] | None = None) -> list[Rank]:
        """The live ranks among `targets` (default: the session's target set)."""
        wanted = self.targets if targets is None else frozenset(targets)
        return [r for r in self.ranks if r.state.alive and (wanted is None or r.index in wanted)]

    def all_settled(self, ranks: Iterable[Rank]) -> bool:
        """True when each rank is at its prompt, waiting (stalled) or gone."""
        now = time.monotonic()
        return all(rank.settled(now) for rank in ranks)

    async def wait_settled(self, targets: Iterable[int] | None = None) -> None:
        """Wait until every targeted live rank is paused, stalled, or gone (never forever)."""
        ranks = self.live(targets)
        await self.wait_until(lambda: self.all_settled(ranks))

    async def broadcast(self, command: str, targets: Iterable[int] | None = None) -> Broadcast:
        """Send `command` at once to every targeted rank at a prompt; wait until each is back.

        The next broadcast waits for this one. A rank that does not return within the stall
        timeout is reported `waiting` with its stack location, and the broadcast ends without it.
        """
        if not command.strip() or "\n" in command or "\r" in command:
            raise ValueError("a broadcast is one non-empty line (an empty line repeats pdb's last command)")
        async with self._lock:
            ranks = self.live(targets)
            await self.wait_until(lambda: self.all_settled(ranks))
            result = Broadcast(command)
            ready = [r for r in ranks if r.state.at_prompt]
            result.skipped = {r.index: r.state.describe() for r in ranks if not r.state.at_prompt}
            start = {r.index: (r.output.end, r.paused_count) for r in ready}
            self.in_flight_command = command
            line = command.encode() + b"\r"
            for rank in ready:  # all writes first: the ranks start at the same moment
                self.send_input(rank.index, line)
            for rank in ready:
                rank.set_state(rank.state.evolve(phase=Phase.RUNNING))
            self.outstanding = frozenset(start)
            try:
                await self.wait_until(lambda: not self._still_out(start))
            finally:
                self.outstanding, self.in_flight_command = frozenset(), ""
            result.replies = [Reply(r.index, r.output.since(start[r.index][0]), r.state) for r in ready]
            return result

    def _still_out(self, start: dict[int, tuple[int, int]]) -> frozenset[int]:
        """The ranks of a broadcast that have not come back yet (kept in `outstanding`)."""
        back = {i for i in self.outstanding if self._returned(self.ranks[i], start[i][1])}
        if back:
            self.outstanding -= back
        return self.outstanding

    def _returned(self, rank: Rank, paused_count: int) -> bool:
        """True when a rank sent a command is back at its prompt, stalled, or gone."""
        if rank.state.phase is Phase.PAUSED:
            return rank.paused_count > paused_count and rank.settled(time.monotonic())
        return rank.state.phase is Phase.WAITING or not rank.state.alive

    def set_targets(self, spec: str) -> str:
        """`:ranks 0,2-3` / `:ranks all`: set the default target; returns a line for the user."""
        if not spec.strip():
            shown = "all" if self.targets is None else format_ranks(self.targets)
            return f"target ranks: {shown}"
        ranks = parse_ranks(spec, len(self.ranks))
        self.targets = None if len(ranks) == len(self.ranks) else ranks
        return f"target ranks: {'all' if self.targets is None else format_ranks(ranks)}"

    def parse(self, line: str) -> Line:
        """Classify a typed line (see `targets.parse_line`)."""
        return parse_line(line, len(self.ranks))

    # -- teardown ---------------------------------------------------------------------------
    async def close(self, grace: float = 0.5) -> None:
        """End every rank and everything it started, then remove the session's files."""
        if self._closing:
            return
        self._closing = True
        for task in list(self._tasks):
            task.cancel()
        await self._end_ranks(grace)
        if self._server is not None:
            await self._server.close()
        for rank in self.ranks:
            self._close_pty(rank)
        await asyncio.to_thread(self._release)

    def kill_now(self) -> None:
        """Synchronous last resort when the event loop is gone: kill everything, remove files."""
        if self._closing and self._reaper is None:
            return
        self._closing = True
        reaper.kill_all({r.pid for r in self.ranks})
        self._release()

    def _release(self) -> None:
        """Stop the watchdog (it sweeps once more), remove the session's files, close the logs."""
        if self._reaper is not None:
            with contextlib.suppress(OSError):
                self._reaper.stdin.close()  # type: ignore[union-attr]
            self._reaper.wait()
            self._reaper = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
        if self._log is not None:
            self._log.close()
            self._log = None

    async def _end_ranks(self, grace: float) -> None:
        """SIGTERM the rank trees, SIGKILL what outlives `grace` seconds, wait for the exits."""
        for rank in self.ranks:
            if rank.state.alive:
                rank.set_state(rank.state.evolve(ended_by_ddptui=True))
        leaders = {r.pid for r in self.ranks}
        self._signal(reaper.doomed(leaders), signal.SIGTERM)
        everyone = range(len(self.ranks))
        await self.wait_until(lambda: not self.live(everyone), grace)
        await asyncio.to_thread(reaper.kill_all, leaders)  # returns at once when nothing is left
        await self.wait_until(lambda: not self.live(everyone), 2.0)

    @staticmethod
    def _signal(pids: Iterable[int], sig: int) -> None:
        """Send a signal to processes that may already be gone."""
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)

    def _close_pty(self, rank: Rank) -> None:
        """Stop reading a rank's pty and close it."""
        if self._loop is not None:
            self._loop.remove_reader(rank.fd)
            self._loop.remove_writer(rank.fd)
        if not rank.proc.closed:
            rank.proc.fileobj.close()
            rank.proc.closed = True
        rank.closed = True

    def _spawn_task(self, coro: Coroutine[Any, Any, None]) -> None:
        """Run a background coroutine owned by the session."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


__all__ = ["Broadcast", "Reply", "Session"]
