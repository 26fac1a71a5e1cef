"""A terminal of the rank's own, carried over its link: for ranks that ddptui did not spawn.

torchrun's workers share torchrun's stdin and have no controlling terminal; `mp.spawn` children
read /dev/null and share their parent's terminal. Two prompts on one terminal split every typed
line between them. So a rank of a wrapped job opens a pty pair of its own, makes the slave its
stdin, stdout and stderr (and its controlling terminal where it can: Ctrl-C and SIGWINCH then
reach it), and a ddptui thread carries the master's bytes to the core as `Output` while another
types the core's `Input` into it. Standard library only: this runs inside the user's job.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import queue
import select
import struct
import sys
import termios
import threading
from collections.abc import Callable
from typing import TextIO

from ddptui.rank.protocol import Input, Message, Output, Resize

CHUNK = 65536
"""Bytes read from the master at most per message (a line of JSON stays far below MAX_LINE)."""
DRAIN_TIMEOUT = 2.0
"""Seconds `stop` waits for the reader to pass on what is left."""


class Relay:
    """The rank's own pty, wired to fds 0-2, relayed to the core by two daemon threads."""

    def __init__(self, send: Callable[[Message], None], columns: int = 80, lines: int = 24) -> None:
        self._send = send
        self.master, slave = os.openpty()
        self.resize(columns, lines)
        _flush_stdio()
        self._saved = [_dup(fd) for fd in (0, 1, 2)]
        self._detached = False
        for fd in (0, 1, 2):
            os.dup2(slave, fd)
        os.close(slave)
        _take_controlling_terminal()
        _reopen_stdio()
        self._wake_r, self._wake_w = os.pipe()
        self._inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._pump, name="ddptui-relay-out", daemon=True)
        self._reader.start()
        threading.Thread(target=self._type, name="ddptui-relay-in", daemon=True).start()

    def receive(self, message: Message) -> None:
        """A message from the core: bytes to type, or a new size."""
        if isinstance(message, Input):
            self._inbox.put(message.data.encode("latin-1", "replace"))
        elif isinstance(message, Resize):
            self.resize(message.columns, message.lines)

    def resize(self, columns: int, lines: int) -> None:
        """TIOCSWINSZ on the master; the kernel sends SIGWINCH to the terminal's foreground group."""
        if columns > 0 and lines > 0:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))

    def stop(self) -> None:
        """Relay what the terminal still holds, then stop reading (at exit, before `Exited`).

        Output written after this (interpreter shutdown) goes to /dev/null: with nobody reading the
        master, a few KiB more would block the exiting process forever.
        """
        _flush_stdio()
        with contextlib.suppress(OSError):
            os.write(self._wake_w, b"x")
        self._reader.join(DRAIN_TIMEOUT)
        devnull = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            with contextlib.suppress(OSError):
                os.dup2(devnull, fd)
        os.close(devnull)

    def type_keys(self, data: bytes) -> None:
        """Type bytes into the rank's terminal, as if the core had sent them."""
        self._inbox.put(data)

    def say(self, text: str) -> None:
        """Write a line to the stderr the process had before its relayed terminal."""
        with contextlib.suppress(OSError):
            os.write(self._saved[2], text.encode(errors="replace"))

    def restore(self) -> None:
        """Give the process back the stdin, stdout and stderr it had before (ddptui is gone); what
        the relayed terminal still gets goes to that stdout too."""
        self._detached = True
        _flush_stdio()
        for fd, saved in enumerate(self._saved):
            if saved >= 0:
                with contextlib.suppress(OSError):
                    os.dup2(saved, fd)

    def _pump(self) -> None:
        """Master → core, as fast as the rank prints; on `stop`, what is left, then done."""
        while True:
            ready, _, _ = select.select([self.master, self._wake_r], [], [])
            if self.master in ready and not self._relay_once():
                return
            if self._wake_r in ready:
                while select.select([self.master], [], [], 0)[0] and self._relay_once():
                    pass
                return

    def _relay_once(self) -> bool:
        """Read one chunk and send it; False once the terminal is gone."""
        try:
            data = os.read(self.master, CHUNK)
        except OSError:
            return False
        if data and self._detached:
            with contextlib.suppress(OSError):
                os.write(self._saved[1], data)
        elif data:
            self._send(Output(data.decode("latin-1")))
        return bool(data)

    def _type(self) -> None:
        """Core → master: the bytes typed into the rank's pane (blocking here, never on the link)."""
        while True:
            data = self._inbox.get()
            with contextlib.suppress(OSError):
                while data:
                    data = data[os.write(self.master, data) :]


def _dup(fd: int) -> int:
    """A copy of `fd` that survives its replacement (-1 when the process has no such fd)."""
    try:
        copy = os.dup(fd)
    except OSError:
        return -1
    os.set_inheritable(copy, False)
    return copy


def _flush_stdio() -> None:
    """Flush Python's streams before their file descriptors change."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            if stream is not None:
                stream.flush()


def _take_controlling_terminal() -> None:
    """Make fd 0 the process's controlling terminal, in a session of its own if it is not one.

    torchrun's workers lead sessions of their own already; an `mp.spawn` child is in its parent's
    session, which it leaves (it is no process group leader, so `setsid` succeeds). Best effort:
    without it Ctrl-C typed in the pane does not interrupt the rank, nothing else changes.
    """
    with contextlib.suppress(OSError):
        if os.getsid(0) != os.getpid():
            os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _reopen_stdio() -> None:
    """Point `sys.stdin` at fd 0 (an `mp.spawn` child reads /dev/null on another fd) and make the
    output streams line-buffered, as Python does on a terminal: pdb needs both, readline the first.
    """
    if _fileno(sys.stdin) != 0:
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        sys.stdin = open(0, encoding=encoding, errors="surrogateescape", closefd=False)  # noqa: SIM115
    for stream in (sys.stdout, sys.stderr):
        if _fileno(stream) in (1, 2):
            with contextlib.suppress(Exception):
                stream.reconfigure(line_buffering=True)  # type: ignore[union-attr]


def _fileno(stream: TextIO | None) -> int:
    """A stream's file descriptor, -1 when it has none."""
    try:
        return stream.fileno() if stream is not None else -1
    except (OSError, ValueError, AttributeError):
        return -1
