"""A rank's terminal read into its transport's `on_output`: by the pty pump into a ring, or on the
event loop when there is no pump (or it died); the rank's exit status handed over after its last bytes.
"""

from __future__ import annotations

import asyncio
import os

from ddptui.core.transport.interface import RankTransport
from ddptui.core.transport.pump import PTY_CHUNK, Pump
from ddptui.core.transport.ring import CLOSED, FLUSHED, Ring

READ_CAP = 1 << 14
"""Bytes read from one pty per wake-up at most (ptys read on the loop, without the pump), so
flooding ranks cannot starve the loop: a key waits behind every ready pty's reads, and a larger
cap makes a pass over eight flooding ranks many times longer. At this size the ranks still drain
about as fast as under tmux (`bench/ui_flood.py --no-pump`)."""
TAKE_CAP = 1 << 13
"""Bytes taken from one rank's ring per turn at most. The copy is cheap; what the UI does with
the bytes is not (a pane's skip-ahead emulates inside `feed`): a larger take makes a key wait
longer during a flood, and a smaller one does not slow the ranks, which a full ring holds back
(`bench/ui_flood.py`: drain against tmux, key p99)."""
EXIT_FLUSH = 2.0
"""Seconds an exited rank waits for the pump to drain its pty (a child of the rank may hold the
terminal open, and write, forever)."""


class PtyReader(RankTransport):
    """The reading half of a local rank's transport: its pty's bytes, then its exit status."""

    def __init__(self, fd: int, pump: Pump | None) -> None:
        """Read the pty `fd` through `pump` when given (and alive), else on this loop."""
        super().__init__()
        self._fd = fd
        self._closed = False
        self._loop = asyncio.get_running_loop()
        self._pump = pump
        self._ring: Ring | None = None
        self._key = -1
        self._status: int | None = None
        """The exit status, until the last bytes are in and it is handed over."""
        self._exit_timer: asyncio.TimerHandle | None = None
        if pump is not None and pump.alive:
            self._key, self._ring = pump.add(fd, self._take, self._unpumped)
        else:
            self._loop.add_reader(fd, self._drain)

    @property
    def closed(self) -> bool:
        """True once the pty is closed."""
        return self._closed

    def _read(self) -> bytes:
        """Read all the pty has (up to READ_CAP); marks the terminal closed on EIO or EOF.

        A pty returns at most 4095 bytes a read and holds about 14 KiB before the writer blocks:
        reading only once per wake-up would tie a rank's output speed to the UI's loop.
        """
        data = b""
        while len(data) < READ_CAP and not self._closed:
            try:
                chunk = os.read(self._fd, 65536)
            except BlockingIOError:
                break
            except OSError:
                chunk = b""
            if not chunk:
                self._closed = True
                self._loop.remove_reader(self._fd)
                break
            data = data + chunk if data else chunk  # one read nearly always has it all (a step's output)
            if len(chunk) < PTY_CHUNK:
                break
        return data

    def _drain(self) -> None:
        """Read the pty as fast as it fills: a slow UI must never block a rank's writes."""
        data = self._read()
        if data:
            self.on_output(data)

    def _take(self) -> bool:
        """Take what the pump put in the ring (a turn's share; all of it once the rank exited);
        True while the ring holds more."""
        ring = self._ring
        assert ring is not None
        closed, flushed = ring.slots[CLOSED], ring.slots[FLUSHED]  # first: bytes before them are in
        if (closed or flushed) and self._status is not None:
            self._exited()
            return False
        full = ring.unread() >= ring.size
        data = ring.take(TAKE_CAP)
        if full and self._pump is not None:
            self._pump.room()
        if data:
            self.on_output(data)
        if closed and not ring.unread():
            self._closed = True
        return self._ring is ring and ring.unread() > 0

    def _unpumped(self) -> None:
        """The pump is gone: take what it left, then read the pty here (no other reader is left)."""
        self._take_all()
        assert self._ring is not None
        self._ring.close()
        self._ring = None
        if not self._closed:
            self._loop.add_reader(self._fd, self._drain)
        if self._status is not None:
            self._exited()

    def _take_all(self) -> None:
        """Take all the ring holds (the rank exited, or the pump is gone); closed once the pump saw EOF."""
        ring = self._ring
        assert ring is not None
        closed = bool(ring.slots[CLOSED])  # first: the bytes before EOF are in the ring by then
        data = ring.take(ring.size)
        self._closed = self._closed or closed
        if data:
            self.on_output(data)

    def _ended(self, status: int) -> None:
        """The process is gone: its status goes out once the pump drained its pty (at most
        EXIT_FLUSH later), or now when the pty is read here."""
        self._status = status
        if self._ring is not None and self._pump is not None:
            self._pump.flush(self._key)
            self._exit_timer = self._loop.call_later(EXIT_FLUSH, self._exited)
        else:
            self._exited()

    def _exited(self) -> None:
        """Hand over the rank's last bytes, then its exit status (once)."""
        status, self._status = self._status, None
        if status is None:
            return
        if self._exit_timer is not None:
            self._exit_timer.cancel()
        if self._ring is not None:
            self._take_all()
        while not self._closed and self._ring is None and (data := self._read()):
            self.on_output(data)
        self.on_exit(os.waitstatus_to_exitcode(status))

    def _stop_reading(self) -> None:
        """Read the pty no more (the pump forgets it; its ring is unmapped)."""
        if self._ring is not None and self._pump is not None:
            self._pump.forget(self._key)
            self._ring.close()
            self._ring = None
        self._loop.remove_reader(self._fd)
