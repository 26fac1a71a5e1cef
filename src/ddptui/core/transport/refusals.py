"""What the link server says under pressure: refusals counted, and a full fd table said once.

A flood of peers without the token (a port scan, a misconfigured job) used to print one line per
peer, hundreds in a second; running out of file descriptors made asyncio print a traceback per
failed `accept`. Now the first few refusals of a window are said, the rest counted in one line at
its end; an `accept` that fails for want of descriptors is said once per episode, in one line,
and asyncio retries it a second later as it always does.
"""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from typing import Any

WINDOW = 10.0
"""Seconds of one window of refusals."""
SAID = 3
"""Refusals said one by one in a window; the rest are counted."""
OUT_OF = "socket.accept() out of system resource"
"""How asyncio's loop reports an `accept` that failed for want of resources (it retries later)."""
SCARCE = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


class Refusals:
    """Refused peers said, at most SAID a WINDOW, the others as one count when it ends."""

    def __init__(self, say: Callable[[str], None]) -> None:
        self._say = say
        self._in_window = 0
        self._unsaid = 0
        self._timer: asyncio.TimerHandle | None = None

    def refused(self, line: str) -> None:
        """One refusal: said, or counted when this window said enough."""
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(WINDOW, self.flush)
        self._in_window += 1
        if self._in_window <= SAID:
            self._say(line)
        else:
            self._unsaid += 1

    def flush(self) -> None:
        """End the window: say how many refusals went unsaid in it."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._unsaid:
            self._say(f"{self._unsaid} more connections refused in the last {WINDOW:.0f} s")
        self._in_window = self._unsaid = 0


class AcceptErrors:
    """The loop's exception handler while the server listens: a failed `accept` for want of
    descriptors said once per episode (one line, no traceback); anything else as before."""

    def __init__(self, loop: asyncio.AbstractEventLoop, say: Callable[[str], None]) -> None:
        self._loop = loop
        self._say = say
        self._before = loop.get_exception_handler()
        self.scarce = False
        """True from a failed accept until a connection is accepted again."""
        loop.set_exception_handler(self._handle)

    def _handle(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """Take asyncio's accept failures; pass on everything else."""
        exc = context.get("exception")
        if context.get("message") == OUT_OF and isinstance(exc, OSError) and exc.errno in SCARCE:
            if not self.scarce:
                self.scarce = True
                name = errno.errorcode.get(exc.errno or 0, "")
                self._say(
                    f"cannot accept connections: {os.strerror(exc.errno or 0)} ({name}); "
                    "retrying every second"
                )
        elif self._before is not None:
            self._before(loop, context)
        else:
            loop.default_exception_handler(context)

    def accepted(self) -> None:
        """A connection came in: a later shortage is a new episode, said again."""
        self.scarce = False

    def close(self) -> None:
        """Give the loop its handler back."""
        if self._loop.get_exception_handler() == self._handle:
            self._loop.set_exception_handler(self._before)
