"""`LinkedRank`: a rank ddptui did not spawn, reached through its link alone.

The rank relays a pty of its own over its link (`ddptui.rank.relay`): its terminal's bytes come
as `Output` messages, keys and sizes go back as `Input` and `Resize`, and its exit is what it says
in `Exited` (or, when its link closes without one, `NO_STATUS`: ddptui is not its parent and cannot
read the kernel's status). A rank is a placeholder until its process connects: it exists from the
moment the first rank of the job says how many there are.
"""

from __future__ import annotations

import contextlib

import psutil

from ddptui.core.model.state import NO_STATUS
from ddptui.core.transport.channel import Connection
from ddptui.core.transport.interface import RankTransport, RequestError
from ddptui.core.transport.usage import tree_usage
from ddptui.rank.asks import Stack
from ddptui.rank.protocol import Exited, Hello, Input, Message, Output, Resize


class LinkedRank(RankTransport):
    """A rank whose terminal, requests and exit all travel over its link."""

    dials_in = True

    UNLINKED = "the rank has not connected to ddptui yet"

    def __init__(self) -> None:
        super().__init__()
        self.process: psutil.Process | None = None
        """The process at the other end of the link (the kernel's word for it), for CPU sampling."""
        self.usage: tuple[float, bool] | None = None
        """The last CPU sample of the rank's process tree (see `sample`)."""
        self._size: tuple[int, int] | None = None
        self._closed = False
        self._status: int | None = None

    def link(self, connection: Connection, hello: Hello) -> None:
        """Take the rank's authenticated connection: from now on it is this rank."""
        self.connection, self.identity = connection, hello.identity
        connection.bind(self._event)
        connection.on_close = self._lost
        with contextlib.suppress(psutil.Error, ValueError):
            if connection.peer_pid > 0:
                self.process = psutil.Process(connection.peer_pid)
        if self._size is not None:
            connection.send(Resize(*self._size))

    def _event(self, message: Message) -> None:
        """Terminal bytes to the owner's output; an exit ends the rank; anything else is an event."""
        if isinstance(message, Output):
            self.on_output(message.data.encode("latin-1", "replace"))
            return
        self.on_message(message)
        if isinstance(message, Exited):
            self._exited(message.code)

    def _lost(self) -> None:
        """The link closed: the rank is gone, with the status it said, else without one."""
        self._exited(NO_STATUS)

    def _exited(self, status: int) -> None:
        """Report the exit once (a rank's forked children may keep the socket open after it)."""
        self._closed = True
        if self._status is None:
            self._status = status
            self.on_exit(status)

    def never_linked(self) -> None:
        """A placeholder whose process never connected, and never will (its launcher is gone)."""
        if self.connection is None:
            self._exited(NO_STATUS)

    @property
    def size(self) -> tuple[int, int] | None:
        """The terminal size last set (columns, lines), if any."""
        return self._size

    @property
    def remote(self) -> bool:
        """True for a rank that connected over TCP (`ddptui listen`): ddptui cannot signal it."""
        return self.connection is not None and self.connection.peer_pid == 0

    @property
    def closed(self) -> bool:
        """True once the rank exited or its link closed."""
        return self._closed

    def write(self, data: bytes) -> None:
        """Type bytes into the rank's terminal (dropped before it connects and after it exits)."""
        if self.connection is not None and not self._closed:
            self.connection.send(Input(data.decode("latin-1")))

    def resize(self, columns: int, lines: int) -> None:
        """Set the rank's terminal size, now or as soon as it connects."""
        self._size = (columns, lines)
        if self.connection is not None and not self._closed:
            self.connection.send(Resize(columns, lines))

    async def stack_dump(self) -> str:
        """The main thread's stack from the rank's own `stack` answer, in faulthandler's layout."""
        try:
            threads = await self.request(Stack(), 1.0)
        except RequestError:
            return ""
        lines = []
        for thread in threads:
            if thread.main:
                lines.append("Current thread 0x0000000000000000 (most recent call first):")
                for frame in reversed(thread.frames):
                    lines.append(f'  File "{frame.file}", line {frame.line} in {frame.func}')
        return "\n".join(lines) + "\n" if lines else ""

    def sample(self) -> None:
        """Measure the CPU use of the rank's process tree (blocking: a /proc scan)."""
        self.usage = tree_usage(self.process) if self.process is not None and not self._closed else None

    def activity(self) -> tuple[float, bool] | None:
        """The last CPU sample; None when the rank's process is not visible from here."""
        return self.usage

    def close(self) -> None:
        """Drop the link."""
        if self.connection is not None:
            self.connection.close()
