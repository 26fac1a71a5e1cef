"""The pty pump: a small process that drains the ranks' terminals into shared rings.

Reading a pty from the UI process ties a rank's output speed to the UI's event loop, and every
read wakes the blocked writer, which then preempts the UI on a small machine (`bench/ui_flood.py
--no-pump`: about two thirds of the loop's flood time goes to pty reads, under half on the CPU). The pump
reads every pty as soon as it has bytes, into a ring per rank in shared memory (a memfd, mapped
by both processes), and wakes ddptui through one socket only when there is news and ddptui took
the last wake-up: the UI loop gets one wake-up per pass over every rank, and each take is a
memory copy.

Seen from the pump, over one `SOCK_SEQPACKET` socket: `A ID` with the pty's master fd and the
ring's memfd adds a rank; `F ID` asks it to read that pty to EAGAIN or EOF once more (the rank
exited) and raise the ring's `flushed` flag; `D ID` forgets it; `K` says ddptui took what the
rings held when it was woken; `R` that it took from a full ring. The pump sends `W` (wake up). A
full ring stops the reading of its pty until ddptui takes from it, so the rank blocks as with any
slow terminal, and no byte is dropped. The pump ends on EOF (ddptui closed the socket or died),
on its parent's death (`PR_SET_PDEATHSIG`) and when its parent changes.

Each rank's bytes wait in a `ring.Ring`. ddptui's side (`Pump`) keeps its own copy of every master
fd for input and resizes, and never reads one while the pump holds it. The child side uses the
standard library only.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import platform
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable

from ddptui.core.transport.ring import CLOSED, FLUSHED, HEADER, RING_SIZE, Ring

PASS_CAP = 1 << 16
"""Bytes the pump reads from one pty per pass, so one rank cannot delay the others' wake-ups."""
PTY_CHUNK = 4095
"""The most a Linux pty returns per read: a shorter read means it is drained."""
PARENT_CHECK_MS = 1000
"""How often an idle pump checks that ddptui is still its parent."""
PR_SET_PDEATHSIG = 1
TURN_BUDGET = 0.004
"""Seconds of the UI loop that ranks' takes may use in one go before other callbacks run."""
ORDERED_STORES = platform.machine().lower() in ("x86_64", "amd64")
"""True where a ring is safe: it relies on x86-64 keeping stores in order (Python has no memory
barrier). Elsewhere (an ARM node such as a Grace Hopper) the ptys are read on the loop."""


# -- the pump process (standard library only) ---------------------------------------------------
class Source:
    """One rank's pty as the pump reads it."""

    def __init__(self, fd: int, ring: Ring) -> None:
        self.fd = fd
        self.ring = ring
        self.paused = False
        """The ring was full: the pty is not polled until ddptui takes some."""
        self.flush = False
        """ddptui asked for everything up to EAGAIN or EOF (the rank exited)."""


class Pumping:
    """The pump's loop: poll the ptys and the control socket, fill rings, wake ddptui."""

    def __init__(self, control: socket.socket, parent: int) -> None:
        self.control = control
        self.parent = parent
        self.poll = select.poll()
        self.poll.register(control, select.POLLIN)
        self.sources: dict[int, Source] = {}
        self.by_fd: dict[int, Source] = {}
        self.awaiting = False
        """A `W` was sent and ddptui has not said `K` yet."""
        self.news = False
        """A ring's count or flag changed since the last `W`."""

    def run(self) -> None:
        """Pass after pass until ddptui is gone."""
        while self.step():
            pass

    def step(self) -> bool:
        """One pass: read what is ready, answer commands, wake ddptui; False when it is gone."""
        for fd, _ in self.poll.poll(PARENT_CHECK_MS):
            if fd == self.control.fileno():
                if not self.commands():
                    return False
            elif fd in self.by_fd:
                self.read(self.by_fd[fd])
        for source in [s for s in self.sources.values() if s.flush and not s.paused]:
            self.read(source)
        return self.wake() and os.getppid() == self.parent

    def commands(self) -> bool:
        """Handle every queued command; False on EOF."""
        while True:
            try:
                message, fds, _, _ = socket.recv_fds(self.control, 64, 2)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not message:
                return False
            self.command(message.decode().split(), fds)

    def command(self, words: list[str], fds: list[int]) -> None:
        """Add, flush or forget a rank, or note that ddptui took its wake-up."""
        if words[0] in ("K", "R"):
            if words[0] == "K":
                self.awaiting = False
                self.news = self.news or any(s.ring.unread() for s in self.sources.values())
            for source in self.sources.values():
                self.resume(source)
        elif words[0] == "A":
            pty_fd, ring_fd = fds
            self.add(int(words[1]), Source(pty_fd, Ring(ring_fd, os.fstat(ring_fd).st_size - HEADER)))
            os.close(ring_fd)
        elif words[0] == "F" and int(words[1]) in self.sources:
            self.sources[int(words[1])].flush = True
        elif words[0] == "D" and int(words[1]) in self.sources:
            self.drop(int(words[1]))

    def add(self, key: int, source: Source) -> None:
        """Start reading a rank's pty."""
        os.set_blocking(source.fd, False)
        self.sources[key] = source
        self.by_fd[source.fd] = source
        self.poll.register(source.fd, select.POLLIN)

    def drop(self, key: int) -> None:
        """Stop reading a rank's pty and let go of it."""
        source = self.sources.pop(key)
        self.stop(source)
        source.ring.close()

    def stop(self, source: Source) -> None:
        """Close the pump's copy of the pty (ddptui keeps its own)."""
        if self.by_fd.pop(source.fd, None) is not None:
            if not source.paused:
                self.poll.unregister(source.fd)
            os.close(source.fd)

    def resume(self, source: Source) -> None:
        """Poll a paused pty again once its ring has room."""
        if source.paused and source.fd in self.by_fd and source.ring.unread() < source.ring.size:
            source.paused = False
            self.poll.register(source.fd, select.POLLIN)

    def read(self, source: Source) -> None:
        """Read a pty into its ring: up to PASS_CAP, or to EAGAIN/EOF when flushing."""
        got = 0
        while source.fd in self.by_fd and (got < PASS_CAP or source.flush):
            free = source.ring.free()
            if not free:
                source.paused = True
                self.poll.unregister(source.fd)
                return
            count = self.read_once(source, free)
            got += count
            if count == 0 or (count < PTY_CHUNK and not source.flush):
                return

    def read_once(self, source: Source, free: list[memoryview]) -> int:
        """One read into the ring; 0 when the pty is drained (EAGAIN) or closed (EOF, EIO)."""
        try:
            count = os.readv(source.fd, free)
        except BlockingIOError:
            self.flushed(source)
            return 0
        except OSError:
            count = 0
        if count == 0:
            source.ring.slots[CLOSED] = 1
            self.stop(source)
            self.flushed(source)
            self.news = True
            return 0
        source.ring.wrote(count)
        self.news = True
        return count

    def flushed(self, source: Source) -> None:
        """The pty is drained: answer a pending flush request."""
        if source.flush:
            source.flush = False
            source.ring.slots[FLUSHED] = 1
            self.news = True

    def wake(self) -> bool:
        """Send `W` when there is news and ddptui took the last one; False when ddptui is gone."""
        if self.news and not self.awaiting:
            try:
                self.control.send(b"W")
            except BlockingIOError:
                return True
            except OSError:
                return False
            self.awaiting, self.news = True, False
        return True


def main() -> None:
    """`python -m ddptui.core.transport.pump PARENT_PID CONTROL_FD`: pump until ddptui is gone."""
    parent, fd = int(sys.argv[1]), int(sys.argv[2])
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        return
    control = socket.socket(fileno=fd)
    control.setblocking(False)
    Pumping(control, parent).run()


# -- ddptui's side ------------------------------------------------------------------------------
class Pump:
    """The pump process as ddptui drives it: hand it ptys, take bytes when it wakes the loop."""

    def __init__(self, env: dict[str, str], ring_size: int = RING_SIZE) -> None:
        """Start the pump process (with `env`); each rank gets a ring of `ring_size` bytes."""
        self.ring_size = ring_size
        self._control, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ddptui.core.transport.pump", str(os.getpid()), str(child.fileno())],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,  # never over the app's screen; a dead pump is replaced anyway
            pass_fds=[child.fileno()],
            start_new_session=True,
            env=env,
        )
        """The pump (not a rank: it never carries the session's directory in its environment)."""
        child.close()
        self._control.setblocking(False)
        self._takers: dict[int, tuple[Callable[[], bool], Callable[[], None]]] = {}
        self._next = 0
        self._turn: list[int] = []
        """Ranks still to take from since the last wake-up (`K` goes once they all did)."""
        self._first = 0
        """Where the next wake-up's turn starts, so that no rank always comes last."""
        self.alive = True
        """False once the pump is gone: the ranks read their ptys themselves again."""
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(self._control, self._woken)

    def stopped(self) -> bool:
        """True while the pump process is stopped (SIGSTOP, ^Z, a debugger): no pty is drained.

        Its ranks then block on a full terminal and look idle where they print; this is how
        ddptui can say why (one read of /proc, cheap enough for every tick).
        """
        try:
            with open(f"/proc/{self.process.pid}/stat", "rb") as stat:
                state = stat.read().rpartition(b")")[2].split()[:1]
        except OSError:
            return False
        return state in ([b"T"], [b"t"])

    def add(self, fd: int, take: Callable[[], bool], gone: Callable[[], None]) -> tuple[int, Ring]:
        """Hand the pump a pty; `take` runs on every wake-up (and says whether its ring still
        holds bytes), `gone` if the pump dies."""
        ring, ring_fd = Ring.create(self.ring_size)
        key, self._next = self._next, self._next + 1
        self._takers[key] = (take, gone)
        try:
            self._send(f"A {key}", [fd, ring_fd])
        finally:
            os.close(ring_fd)
        return key, ring

    def flush(self, key: int) -> None:
        """Ask for the rest of a pty's bytes (its rank exited): the ring's FLUSHED says when."""
        self._send(f"F {key}")

    def room(self) -> None:
        """A full ring has room again: the pump reads its pty again (without waiting for `K`,
        which comes only once every ring is empty)."""
        self._send("R")

    def forget(self, key: int) -> None:
        """The pump closes its copy of the pty; nothing wakes for it any more."""
        if self._takers.pop(key, None) is not None:
            self._send(f"D {key}")

    def _send(self, text: str, fds: list[int] | None = None) -> None:
        """One command (a short message: the socket never fills); a dead pump is noticed later."""
        if self.alive:
            with contextlib.suppress(OSError):
                socket.send_fds(self._control, [text.encode()], fds or [])

    def _woken(self) -> None:
        """The pump has news: every rank takes its share, then the pump may wake us again."""
        if not self._consume_wakeups():
            self._gone()
            return
        keys = list(self._takers)
        self._first = (self._first + 1) % max(len(keys), 1)
        self._turn = keys[self._first :] + keys[: self._first]
        self._take_turns()

    def _take_turns(self) -> None:
        """Ranks take in turn for at most TURN_BUDGET; the rest after whatever else waits (keys).

        A pane's take may emulate (its skip-ahead), so eight takes in one callback would hold a key
        behind all of them. A rank whose ring still holds bytes takes again in the next round, a
        callback of its own (what else waits, keys, runs in between): the pump is asked for a new
        wake-up (`K`) only once every ring is empty, so a flood's pace is not the round trip's (one
        take a wake-up would move 8 KiB per `K` and `W`).
        """
        deadline = time.perf_counter() + TURN_BUDGET
        again: list[int] = []
        try:
            while self._turn and time.perf_counter() < deadline:
                key = self._turn.pop(0)
                taker = self._takers.get(key)
                if taker is not None and taker[0]():
                    again.append(key)
        finally:
            self._turn += again
            if self._turn:
                self._loop.call_soon(self._take_turns)
            else:
                self._send("K")

    def _consume_wakeups(self) -> bool:
        """Read the queued `W`s; False when the pump is gone (EOF or an error)."""
        while True:
            try:
                if not self._control.recv(64):
                    return False
            except BlockingIOError:
                return True
            except OSError:
                return False

    def _gone(self) -> None:
        """The pump ended: stop listening; ranks it still read go back to reading their ptys."""
        self.alive = False
        if self._control.fileno() != -1:
            self._loop.remove_reader(self._control)
            self._control.close()
        takers, self._takers, self._turn = list(self._takers.values()), {}, []
        for _, gone in takers:
            gone()

    def close(self, timeout: float = 2.0) -> None:
        """End the pump and collect it (blocking, bounded; any thread).

        The shutdown is the pump's EOF; the loop's reader sees it too and lets go of the socket.
        """
        with contextlib.suppress(OSError):
            self._control.shutdown(socket.SHUT_RDWR)
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


if __name__ == "__main__":
    main()
