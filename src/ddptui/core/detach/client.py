"""A client's end of a detached session's socket: blocking, one line in flight at a time."""

from __future__ import annotations

import contextlib
import socket
from typing import TextIO

from ddptui.core.detach import wire
from ddptui.core.detach.places import Entry

ANSWER_TIMEOUT = 10.0
"""Seconds a session has to answer a hello or a status."""
KILL_TIMEOUT = 120.0
"""Seconds a session has to end its ranks and say so after a kill (its teardown is bounded)."""


class JoinError(Exception):
    """A session that cannot be reached or that refused; the message is one line."""


class Client:
    """A connection to one session, after its hello was taken."""

    def __init__(self, entry: Entry) -> None:
        """Connect and say hello with the session's token (JoinError: refused, or no answer)."""
        self.entry = entry
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(ANSWER_TIMEOUT)
        try:
            self._sock.connect(str(entry.socket))
        except OSError as exc:
            self._sock.close()
            raise JoinError(
                f"cannot reach session {entry.id} at {entry.socket}: {exc.strerror or exc}"
            ) from None
        self._buffer = bytearray()
        self.send(wire.Hello(entry.token, wire.VERSION))
        answer = self._next(
            f"session {entry.id} refused the connection (a wrong token, or no ddptui session)"
        )
        if isinstance(answer, wire.Refused):
            raise JoinError(f"session {entry.id} refused: {answer.reason}")
        if not isinstance(answer, wire.Welcome):
            raise JoinError(f"session {entry.id} answered a hello with {answer.KIND}")

    def run(self, text: str, out: TextIO) -> wire.Ended | None:
        """Run one line, writing what it prints to `out`; the `Ended` if the session ended."""
        self.send(wire.Line(text))
        return self._until_done(out, None)

    def status(self) -> wire.Report:
        """How the session's ranks are (`0-3: paused at train.py:9`, one entry a state), and how
        many terminals show it."""
        self.send(wire.Status())
        answer = self._next()
        return answer if isinstance(answer, wire.Report) else wire.Report((), 0)

    def kill(self, out: TextIO) -> wire.Ended:
        """End the session and every rank; what it printed last goes to `out`."""
        self.send(wire.Kill())
        ended = self._until_done(out, KILL_TIMEOUT)
        if ended is None:
            raise JoinError(f"session {self.entry.id} did not end")
        return ended

    def close(self) -> None:
        """Say bye and close: the session and its ranks stay as they are."""
        with contextlib.suppress(OSError):
            self.send(wire.Bye())
        self._sock.close()

    def fileno(self) -> int:
        """The socket's, for `select`."""
        return self._sock.fileno()

    def send(self, message: wire.Message) -> None:
        """Send one message (OSError: the session is gone)."""
        self._sock.sendall(message.encode())

    def received(self) -> list[wire.Message]:
        """After `select` says the socket is readable: the messages that came whole (JoinError at
        the connection's end or a garbled line)."""
        timeout = self._sock.gettimeout()
        self._sock.settimeout(0)
        try:
            self._fill(f"session {self.entry.id} closed the connection")
        except (BlockingIOError, InterruptedError):
            return []
        finally:
            self._sock.settimeout(timeout)
        return self.pending()

    def pending(self) -> list[wire.Message]:
        """The messages already read whole (JoinError for a garbled or overlong line)."""
        messages = []
        while (end := self._buffer.find(b"\n")) >= 0:
            messages.append(self._decode(bytes(self._buffer[: end + 1])))
            del self._buffer[: end + 1]
        if len(self._buffer) > wire.MAX_LINE:
            raise JoinError(f"session {self.entry.id} sent a line past {wire.MAX_LINE} bytes")
        return messages

    def _until_done(self, out: TextIO, timeout: float | None) -> wire.Ended | None:
        """Write `Output`s to `out` until `Done` (None) or `Ended`."""
        self._sock.settimeout(timeout)
        while True:
            message = self._next()
            if isinstance(message, wire.Output):
                out.write(message.text)
                out.flush()
            elif isinstance(message, wire.Ended):
                return message
            elif isinstance(message, wire.Done):
                return None

    def _next(self, at_end: str = "") -> wire.Message:
        """The next message (JoinError, saying `at_end` at the connection's end, or a garbled line)."""
        while (end := self._buffer.find(b"\n")) < 0:
            if len(self._buffer) > wire.MAX_LINE:
                raise JoinError(f"session {self.entry.id} sent a line past {wire.MAX_LINE} bytes")
            self._fill(at_end or f"session {self.entry.id} closed the connection without a word")
        line = bytes(self._buffer[: end + 1])
        del self._buffer[: end + 1]
        return self._decode(line)

    def _fill(self, at_end: str) -> None:
        """Read what the session sent into the buffer (JoinError: `at_end` at the connection's end,
        no answer in time, or a broken connection; BlockingIOError on a non-blocking socket)."""
        try:
            data = self._sock.recv(1 << 16)
        except TimeoutError:
            raise JoinError(f"session {self.entry.id} does not answer") from None
        except (BlockingIOError, InterruptedError):
            raise
        except OSError as exc:
            raise JoinError(f"session {self.entry.id}: {exc.strerror or exc}") from None
        if not data:
            raise JoinError(at_end)
        self._buffer += data

    def _decode(self, line: bytes) -> wire.Message:
        try:
            return wire.decode(line)
        except wire.WireError as exc:
            raise JoinError(f"session {self.entry.id} sent {exc}") from None
