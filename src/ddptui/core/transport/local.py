"""Ranks on this machine: a pty per rank (the one ptyprocess adapter), and ending them safely.

`LocalRank` is the `RankTransport` of a rank ddptui spawned (its terminal read by `PtyReader`).
`LocalJob` owns what the ranks of one session leave behind: it makes ddptui a child subreaper (so
double-forked descendants stay under it), runs the watchdog that ends everything if ddptui dies,
samples CPU use for the stall watch, and ends the ranks' process trees. Only processes that are
provably the session's own are ever signalled: psutil checks each one's start time at the moment of
signalling, and a process counts as ours when it descends from a live rank or carries the session's
directory in its environment (which a stranger that reused a dead rank's pid does not).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
from ptyprocess import PtyProcess

from ddptui.core.transport import home_cpu
from ddptui.core.transport.channel import Connection
from ddptui.core.transport.ending import kill_all, session_processes, signal_all
from ddptui.core.transport.pty_reader import PtyReader
from ddptui.core.transport.pump import Pump
from ddptui.core.transport.ring import Ring
from ddptui.core.transport.usage import ProcessTable
from ddptui.rank.protocol import STATE_DIR_ENV, Message

REAP_POLL = 0.1
"""Seconds between looks for the ranks' exits where the kernel has no pidfd_open (before Linux
5.3, or a container whose seccomp profile forbids it): the job asks waitpid of each on one timer."""
PR_SET_CHILD_SUBREAPER = 36


class SpawnError(Exception):
    """A rank process that could not be started; the message is one line."""


def become_subreaper() -> None:
    """Adopt orphaned descendants (a rank's `setsid` + double fork) instead of leaving them to init."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


CHILD_DEFAULTS = (signal.SIGINT, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ)
"""Signals a rank starts with at their default, whatever ddptui inherited or set: ddptui started as a
background job ignores SIGINT, and a rank must still stop at Ctrl-C in its pane and at `:interrupt`;
SIGPIPE and SIGXFSZ as `subprocess` restores them."""


def _in_child() -> None:
    """In the forked child, before it execs the rank: the CPUs ddptui was given, default signals."""
    home_cpu.restore_in_child()
    for number in CHILD_DEFAULTS:
        signal.signal(number, signal.SIG_DFL)


class LocalRank(PtyReader):
    """A rank process in a pty of its own, with its link once it says hello."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: str | None,
        size: tuple[int, int],
        pump: Pump | None = None,
    ) -> None:
        """Spawn the rank; its pty is read by `pump` when given (and alive), else on this loop."""
        columns, lines = size
        try:
            self._pty = PtyProcess.spawn(
                argv, cwd=cwd, env=env, dimensions=(lines, columns), preexec_fn=_in_child
            )
        except OSError as exc:
            raise SpawnError(f"cannot start {argv[0]}: {exc}") from None
        os.set_blocking(self._pty.fd, False)
        self.pid: int = self._pty.pid
        self.process = psutil.Process(self.pid)
        """The rank's process, pinned by its start time: never mistaken for a later owner of the pid."""
        self.dump_path = ""
        """Where faulthandler writes this rank's stack on SIGUSR1."""
        self.usage: tuple[float, bool] | None = None
        """The last CPU sample of the rank's tree (set by `LocalJob.sample`)."""
        self._pending = bytearray()
        """Input the pty did not take yet."""
        super().__init__(self._pty.fd, pump)
        self._pidfd: int | None = None
        try:
            self._pidfd = os.pidfd_open(self.pid)
        except (OSError, AttributeError):
            pass  # no pidfd here: `LocalJob` asks `reap` on a timer (`polled`)
        else:
            self._loop.add_reader(self._pidfd, self.reap)
        self.polled = self._pidfd is None
        """True when nothing says this rank exited: `reap` must be asked on a timer."""

    # -- the link -----------------------------------------------------------------------------
    def link(self, connection: Connection) -> None:
        """Take the rank's authenticated connection: its events are this rank's from now on."""
        self.connection = connection
        connection.bind(self._event)

    def _event(self, message: Message) -> None:
        """Hand an event from the link to the owning `Rank`."""
        self.on_message(message)

    # -- the terminal -------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        """Queue bytes for the pty; they are written as it accepts them."""
        if self._closed:
            return
        if not self._pending:  # nearly always: straight to the pty, no queue
            try:
                written = os.write(self._fd, data)
            except BlockingIOError:
                written = 0
            except OSError:
                return
            if written == len(data):
                return
            data = data[written:]
        self._pending += data
        if self._flush():
            self._loop.add_writer(self._fd, self._flush_later)

    def _flush(self) -> bool:
        """Write what the pty takes now; True when bytes remain queued."""
        while self._pending and not self._closed:
            try:
                written = os.write(self._fd, self._pending)
            except BlockingIOError:
                return True
            except OSError:
                self._pending.clear()
                return False
            del self._pending[:written]
        return False

    def _flush_later(self) -> None:
        """Write queued input once the pty accepts it."""
        if not self._flush():
            self._loop.remove_writer(self._fd)

    def resize(self, columns: int, lines: int) -> None:
        """TIOCSWINSZ; the rank gets SIGWINCH."""
        if not self._closed:
            with contextlib.suppress(OSError):
                self._pty.setwinsize(lines, columns)

    def reap(self) -> bool:
        """Collect the exit status once the process is gone, after its last output; True once gone."""
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            pid, status = self.pid, 255 << 8
        if pid == 0:
            return False
        if self._pidfd is not None:
            self._loop.remove_reader(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        self._pty.terminated, self._pty.exitstatus = True, status
        self._ended(status)
        return True

    def close(self) -> None:
        """Stop reading the pty and close it."""
        self._stop_reading()
        self._loop.remove_writer(self._fd)
        if not self._pty.closed:
            self._pty.fileobj.close()
            self._pty.closed = True
        self._closed = True
        if self.connection is not None:
            self.connection.close()

    # -- sampling -----------------------------------------------------------------------------
    def activity(self) -> tuple[float, bool] | None:
        """The last CPU sample of the rank's process tree."""
        return self.usage

    async def stack_dump(self, timeout: float = 1.0) -> str:
        """Every thread's stack via faulthandler on SIGUSR1 (works while the rank holds the GIL)."""
        if not self.dump_path or not self.linked:
            return ""
        try:
            os.truncate(self.dump_path, 0)
            self.process.send_signal(signal.SIGUSR1)
        except (OSError, psutil.Error):
            return ""
        deadline, last = time.monotonic() + timeout, ""
        while time.monotonic() < deadline:
            await asyncio.sleep(0.02)
            try:
                with open(self.dump_path, errors="replace") as dump:
                    text = dump.read()
            except OSError:
                return ""
            if text and text == last:
                return text
            last = text
        return last


def direct_children() -> set[int]:
    """Pids of this process's children, from `/proc/self/task/*/children` (a few small reads,
    not a scan of every process); psutil's scan where the kernel lacks that file."""
    found: set[int] = set()
    try:
        for task in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{task}/children") as children:
                found.update(int(pid) for pid in children.read().split())
    except (OSError, ValueError):
        with contextlib.suppress(psutil.Error):
            return {child.pid for child in psutil.Process().children()}
    return found


class LocalJob:
    """What one session's local ranks leave behind, and how it all ends."""

    def __init__(self, state_dir: str, pump: bool = False) -> None:
        """A job whose files live in `state_dir`; with `pump`, a pump process reads the ranks' ptys."""
        self.state_dir = state_dir
        self._pumped = pump
        self.pump: Pump | None = None
        """The process that drains the ranks' ptys (see `ddptui.core.transport.pump`), when used."""
        self.ranks: list[LocalRank] = []
        self._polled: list[LocalRank] = []
        """Ranks without a pidfd whose exit is still to be seen (see `REAP_POLL`)."""
        self._adopted: dict[int, psutil.Process] = {}
        """Orphans of the ranks' trees that ddptui, their subreaper, took in (see `adopt`)."""
        self._spawning = threading.Lock()
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._pinned = False
        """This job pinned the loop's thread to a CPU (`home_cpu`)."""

    def start(self, env: dict[str, str]) -> None:
        """Become a subreaper and start the watchdog that cleans up if this process dies."""
        become_subreaper()
        self._watchdog = subprocess.Popen(
            [sys.executable, "-m", "ddptui.core.transport.reaper", self.state_dir],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            env=env,
        )
        if self._pumped and Ring.available():  # no memfd (Linux before 3.17): ptys read on the loop
            self._pinned = home_cpu.pin() is not None  # the loop and the pump share a CPU
            self.pump = Pump({k: v for k, v in env.items() if k != STATE_DIR_ENV})

    def spawn(
        self, argv: list[str], env: dict[str, str], cwd: str | None, size: tuple[int, int]
    ) -> LocalRank:
        """Start a rank and tell the watchdog who it is (pid and start time)."""
        with self._spawning:  # a child forked, not yet a rank, is no orphan to adopt
            rank = LocalRank(argv, env, cwd, size, self.pump)
            self.ranks.append(rank)
        self._tell_watchdog(rank.process)
        if rank.polled:
            self._polled.append(rank)
            if len(self._polled) == 1:  # the first: the timer starts
                asyncio.get_running_loop().call_later(REAP_POLL, self._look_for_exits)
        return rank

    def _tell_watchdog(self, process: psutil.Process) -> None:
        """Have the watchdog end `process` (and what descends from it) should ddptui die."""
        if self._watchdog is not None and self._watchdog.stdin is not None:
            with contextlib.suppress(OSError, psutil.Error):
                self._watchdog.stdin.write(f"{process.pid} {process.create_time()!r}\n".encode())
                self._watchdog.stdin.flush()

    def adopt(self) -> None:
        """Take in the orphans re-parented to ddptui (the subreaper) since the last look: they
        descend from a rank, whatever their environment says, so they end with the session and,
        told to the watchdog, even if ddptui is killed (blocking: reads /proc)."""
        with self._spawning:
            own = self._rank_pids() | set(self._adopted) | {os.getpid()}
            helpers = (self._watchdog, self.pump.process if self.pump is not None else None)
            own |= {helper.pid for helper in helpers if helper is not None}
            orphans = direct_children() - own
        for pid in orphans:
            with contextlib.suppress(psutil.Error):
                process = psutil.Process(pid)
                self._adopted[pid] = process
                self._tell_watchdog(process)

    def _look_for_exits(self) -> None:
        """Without pidfds: one pass of waitpid over the ranks not yet gone, every REAP_POLL seconds."""
        self._polled = [rank for rank in self._polled if not rank.reap()]
        if self._polled:
            asyncio.get_running_loop().call_later(REAP_POLL, self._look_for_exits)

    def processes(self) -> list[psutil.Process]:
        """Every live process of the session (remembering adopted children, to reap them later)."""
        self.adopt()
        roots = [*(r.process for r in self.ranks), *self._adopted.values()]
        return session_processes(roots, self.state_dir, everyone=False)

    def _rank_pids(self) -> set[int]:
        """Pids of the ranks (reaped through their pidfds, not here)."""
        return {rank.pid for rank in self.ranks}

    def sample(self) -> None:
        """Set each rank's CPU use and activity, from one pass over the process table (blocking)."""
        table = ProcessTable()
        for rank in self.ranks:
            rank.usage = table.usage(rank.process)

    def end(self, grace: float) -> None:
        """SIGTERM every process of the session, SIGKILL what outlives `grace` (blocking)."""
        signal_all(self.processes(), signal.SIGTERM)
        end = time.monotonic() + grace
        while time.monotonic() < end and self.processes():
            time.sleep(0.02)
        kill_all(self.processes)
        self._reap_adopted()

    def _reap_adopted(self) -> None:
        """Collect adopted children that exited (a child's pid cannot be reused before this)."""
        for pid in list(self._adopted):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            del self._adopted[pid]

    def release(self) -> None:
        """Stop the watchdog (it sweeps once more and removes the session directory)."""
        self._reap_adopted()
        if self.pump is not None:
            self.pump.close()
            self.pump = None
        if self._pinned:
            self._pinned = False
            home_cpu.unpin()
        if self._watchdog is not None:
            with contextlib.suppress(OSError):
                self._watchdog.stdin.close()  # type: ignore[union-attr]
            self._watchdog.wait()
            self._watchdog = None
