"""`ddptui join [ID]`: this terminal shows a detached session's app until it leaves.

The terminal is put in raw mode and on its alternate screen, as the app would; every key goes to
the session (`Keys`), every byte the app draws comes back (`Screen`), a resize is told (`Size`).
It leaves when the session says so (Ctrl+D or `:detach` in the app), when the session ends
(its summary is printed, its exit status returned), or on SIGHUP/SIGTERM: the terminal is
always restored, and the session and its ranks stay as they are unless the session ended.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import sys
import termios
import time
import tty
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType

from ddptui.core.detach import wire
from ddptui.core.detach.client import Client, JoinError

ENTER = (
    "\x1b[?1049h\x1b[2J\x1b[H\x1b[?25l"  # alternate screen, cleared; cursor hidden
    "\x1b[?1000h\x1b[?1003h\x1b[?1015h\x1b[?1006h"  # mouse reports, as the app asks for them
    "\x1b[?1004h\x1b[?2004h"  # focus events, bracketed paste
)
LEAVE = "\x1b[?2004l\x1b[?1004l\x1b[?1006l\x1b[?1015l\x1b[?1003l\x1b[?1000l\x1b[0m\x1b[?25h\x1b[?1049l"
READ_SIZE = 1 << 16
CTRL_D = b"\x04"
END_TIMEOUT = 120.0
"""Seconds a session has to end its ranks after the signal that ends it (its teardown is bounded)."""


class NotATerminal(JoinError):
    """`ddptui join` without a terminal."""


@dataclass
class Left:
    """Why the view ended: the session's end (`ended`), a detach, or a signal."""

    ended: wire.Ended | None = None
    detached: bool = False
    signal: int = 0
    lost: str = ""
    """The session went away without a word: why."""


def watch(
    client: Client, fd_in: int = 0, fd_out: int = 1, read_only: bool = False, owner: bool = False
) -> Left:
    """Show the session's app on this terminal until it leaves; the terminal restored after.
    `read_only`: keys are not sent; Ctrl+D leaves. `owner`: this terminal started the session
    (`ddptui SCRIPT`): a signal ends the session, and its summary is shown."""
    if not (os.isatty(fd_in) and os.isatty(fd_out)):
        raise NotATerminal(
            "ddptui join needs a terminal; ddptui join --batch FILE drives a session without one"
        )
    saved = termios.tcgetattr(fd_in)
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    left = Left()

    def on_signal(signum: int, _: FrameType | None) -> None:
        if signum != signal.SIGWINCH:
            left.signal = signum
        with contextlib.suppress(OSError):
            os.write(wake_write, bytes([signum]))

    handled = (signal.SIGWINCH, signal.SIGHUP, signal.SIGTERM, *((signal.SIGINT,) if owner else ()))
    old = {sig: signal.signal(sig, on_signal) for sig in handled}
    try:
        columns, lines = os.get_terminal_size(fd_out)
        client.send(wire.Watch(columns, lines, owner))
        tty.setraw(fd_in)
        _write(fd_out, ENTER.encode())
        _relay(client, fd_in, fd_out, wake_read, left, read_only)
        if owner and left.signal:
            _end(client, fd_out, left)
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        with contextlib.suppress(OSError):
            _write(fd_out, LEAVE.encode())
            termios.tcsetattr(fd_in, termios.TCSAFLUSH, saved)
        os.close(wake_read)
        os.close(wake_write)
    return left


def _relay(client: Client, fd_in: int, fd_out: int, wake: int, left: Left, read_only: bool) -> None:
    """Keys to the session, its screen to the terminal, until something makes the view leave."""
    messages = client.pending()
    sock = client.fileno()
    show = functools.partial(_write, fd_out)
    while not take(messages, show, left):
        if left.signal:
            return
        try:
            ready = select.select([fd_in, sock, wake], [], [])[0]
        except InterruptedError:
            continue
        messages = []
        if wake in ready:
            for signum in os.read(wake, 64):
                if signum == signal.SIGWINCH:
                    columns, lines = os.get_terminal_size(fd_out)
                    _send(client, wire.Size(columns, lines), left)
        if fd_in in ready:
            try:
                data = os.read(fd_in, READ_SIZE)
            except OSError:
                data = b""
            if not data:  # the terminal is gone
                left.signal = signal.SIGHUP
                return
            if not read_only:
                _send(client, wire.Keys(wire.encode_bytes(data)), left)
            elif CTRL_D in data:
                left.detached = True
                return
        if sock in ready:
            try:
                messages = client.received()
            except JoinError as exc:
                left.lost = str(exc)
                return
        if left.lost:
            return


def _end(client: Client, fd_out: int, left: Left) -> None:
    """A signal came to the terminal that started the session: end the session as the app ends on
    one (every rank ended), showing its last frames, and keep its summary for `say`."""
    _send(client, wire.Kill(), left)
    show = functools.partial(_quietly, fd_out)
    deadline = time.monotonic() + END_TIMEOUT
    while not left.lost and (wait := deadline - time.monotonic()) > 0:
        if select.select([client.fileno()], [], [], wait)[0]:
            try:
                if take(client.received(), show, left) and left.ended is not None:
                    return
            except JoinError as exc:
                left.lost = str(exc)


def _quietly(fd: int, data: bytes) -> None:
    """Write to a terminal that may be gone (a hangup)."""
    with contextlib.suppress(OSError):
        _write(fd, data)


def take(messages: list[wire.Message], show: Callable[[bytes], None], left: Left) -> bool:
    """Show what the session sent (`show` gets the screen's bytes); True when the view is to
    leave, and why in `left`."""
    for message in messages:
        if isinstance(message, wire.Screen):
            with contextlib.suppress(wire.WireError):
                show(wire.decode_bytes(message.data))
        elif isinstance(message, wire.Leave):
            left.detached = True
            return True
        elif isinstance(message, wire.Ended):
            left.ended = message
            return True
        elif isinstance(message, wire.Refused):
            left.lost = f"the session refused: {message.reason}"
            return True
    return False


def _send(client: Client, message: wire.Message, left: Left) -> None:
    """Send to the session; its end is noted in `left`."""
    try:
        client.send(message)
    except OSError as exc:
        left.lost = f"the session is gone ({exc.strerror or exc})"


def _write(fd: int, data: bytes) -> None:
    """Write all of `data` to the terminal."""
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except InterruptedError:
            continue
        except BlockingIOError:
            select.select([], [fd], [])


def print_summary(ended: wire.Ended) -> None:
    """The summary of a session that ended, a line a rank, on standard output."""
    print("".join(f"{text}\n" for text in ended.summary), end="", flush=True)


def say(left: Left, session_id: str) -> int:
    """After the view: one line (or the summary) on the restored terminal; the exit status (as the
    app's: the job's, or 128 + SIGHUP after a hangup)."""
    if left.ended is not None:
        with contextlib.suppress(OSError):  # a terminal that hung up takes nothing
            print_summary(left.ended)
        return 128 + left.signal if left.signal == signal.SIGHUP else left.ended.status
    if left.detached:
        print(f"ddptui: detached from session {session_id}: ddptui join {session_id} opens it again")
        return 0
    if left.signal:
        return 128 + left.signal
    print(f"ddptui: error: session {session_id}: {left.lost}", file=sys.stderr)
    return 1
