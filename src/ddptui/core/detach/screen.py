"""The terminal of a detached session's app: a pseudo-terminal the session process owns.

The app runs in the session process with this pty's far end as its standard input, output and
error, as if in a terminal; the session reads everything the app writes from the near end
(`on_output`, whether or not a client watches: an app never blocks on a terminal nobody reads)
and writes the watching clients' keys into it. Its size is the smallest of the watching
clients' terminals, so that each sees the whole app.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Callable

DEFAULT_SIZE = (160, 48)
"""Columns and lines of the app while no client watches, before the first one did."""
MIN_SIZE = (20, 5)
MAX_SIZE = (1000, 500)
READ_SIZE = 1 << 16


def clamp(columns: int, lines: int) -> tuple[int, int]:
    """A terminal size a client sent, within what the app can be drawn at."""
    return (
        min(max(columns, MIN_SIZE[0]), MAX_SIZE[0]),
        min(max(lines, MIN_SIZE[1]), MAX_SIZE[1]),
    )


class Screen:
    """The pty pair; `take_stdio` makes its far end this process's standard streams."""

    def __init__(self, columns: int, lines: int) -> None:
        self.near, self._far = os.openpty()
        os.set_blocking(self.near, False)
        self.size = (0, 0)
        self._set_size(*clamp(columns, lines))
        self._reading = False

    def take_stdio(self) -> None:
        """Standard input, output and error become the pty's far end (the app's terminal)."""
        for fd in (0, 1, 2):
            os.dup2(self._far, fd)
        os.close(self._far)
        for name in ("COLUMNS", "LINES"):  # they would stand for the pty's size
            os.environ.pop(name, None)

    def start(self, on_output: Callable[[bytes], None]) -> None:
        """Read what the app writes, handing each chunk to `on_output`, from the running loop."""
        loop = asyncio.get_running_loop()
        loop.add_reader(self.near, self._read, on_output)
        self._reading = True

    def drain(self, on_output: Callable[[bytes], None]) -> None:
        """Hand on what the app wrote and was not read yet."""
        self._read(on_output)

    def stop(self) -> None:
        """Stop reading (the loop ends or the app has)."""
        if self._reading:
            asyncio.get_running_loop().remove_reader(self.near)
            self._reading = False

    def write(self, data: bytes) -> None:
        """Type into the app (what the pty cannot take now is dropped: keys, not a file)."""
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self.near, data)

    def resize(self, columns: int, lines: int) -> bool:
        """Give the app a terminal of this size (clamped); False when it already had it."""
        size = clamp(columns, lines)
        if size == self.size:
            return False
        self._set_size(*size)
        os.kill(os.getpid(), signal.SIGWINCH)  # the pty is no one's controlling terminal: say it
        return True

    def _set_size(self, columns: int, lines: int) -> None:
        fcntl.ioctl(self.near, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
        self.size = (columns, lines)

    def _read(self, on_output: Callable[[bytes], None]) -> None:
        for _ in range(16):  # then the loop's other work, even while the app floods
            try:
                data = os.read(self.near, READ_SIZE)
            except (BlockingIOError, OSError):
                return
            if not data:
                return
            on_output(data)
