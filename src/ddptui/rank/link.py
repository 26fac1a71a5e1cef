"""The rank's end of the link to the core: events out, requests in, over one unix socket.

Why a socket and not text on the pty: "at the prompt" cannot be told reliably from terminal bytes
(typeahead, threads printing, user output that looks like a prompt). The socket's path and the
session's token come in the environment, which survives torchrun and mp.spawn (an inherited fd
does not). Requests are read and answered by ddptui threads, so they are served whatever the
main thread does: sitting at a prompt, blocked in a collective, or running the user's code.

One event goes the other way when it can: `paused`, just before a prompt the rank prints on its
own terminal, is written there as a mark only this session can make (`Link.paused`), so it comes
in order with the prompt it announces, and a lockstep step costs the core one read per rank.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import threading
from collections.abc import Callable

from ddptui.rank import protocol
from ddptui.rank.protocol import TCP_PREFIX, Hello, Identity, Message, ProtocolError, Request

CONNECT_TIMEOUT = 10.0
"""Seconds a rank tries to reach a `ddptui listen` over TCP before it runs undebugged."""

Answerer = Callable[[Request, Callable[[Message], None]], None]
"""What answers the core's requests (`ddptui.rank.requests.answer_later`), given at `connect`: it
sends exactly one `Reply` through the function it is handed. The link does not import it: what
answers sits above the debugger, which sends through the link."""


class Link:
    """A best-effort connection to the core; silent when no ddptui core is listening."""

    def __init__(self, path: str | None, token: str) -> None:
        self._path = path
        self._token = token
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self._hung_up = False
        self._mark_prefix = b""
        self._mark: bytes | None = None
        """`MARK_INTRO KEY ;` when this process's stdout is a terminal the core reads, else None."""
        self.on_message: Callable[[Message], None] | None = None
        """Called on the link's thread with every message from the core that is not a `Request`."""
        self.on_lost: Callable[[], None] | None = None
        """Called on the link's thread when the core hangs up first (it quit, or the network failed)."""
        os.register_at_fork(after_in_child=self._forget)

    @property
    def connected(self) -> bool:
        """True while the core is reachable (after a good `connect`, until either side hangs up)."""
        return self._sock is not None

    def connect(self, identity: Identity, answer: Answerer) -> None:
        """Say hello and start serving requests through `answer`; a failure leaves the rank
        undebugged, not dead."""
        if not self._path:
            return
        try:
            sock = open_socket(self._path)
        except (OSError, ValueError):
            return
        self._sock = sock
        self._mark_prefix = protocol.MARK_INTRO + protocol.mark_key(self._token) + b";"
        self.terminal_changed()
        self.send(Hello(protocol.VERSION, self._token, identity))
        threading.Thread(target=self._serve, args=(sock, answer), name="ddptui-link", daemon=True).start()

    def send(self, message: Message) -> None:
        """Send one message; never raises, because the debugged program must not die of the debugger."""
        sock = self._sock
        if sock is None:
            return
        self.send_line(message.encode())

    def send_line(self, data: bytes) -> None:
        """Send one encoded message (see `send`)."""
        sock = self._sock
        if sock is None:
            return
        with self._lock:
            try:
                sock.sendall(data)
            except OSError:
                self._sock = None

    def terminal_changed(self) -> None:
        """Look again at what stdout is: marks go there only while it is a terminal (a relayed
        rank's stdout becomes the relay's pty after it connected, and can get its own back)."""
        self._mark = self._mark_prefix if self._mark_prefix and os.isatty(1) else None

    def paused(self, line: bytes) -> None:
        """Say `paused` (an encoded line) on this process's terminal if it can, else on the socket.

        Only for a `paused` just before a prompt the rank prints itself: the core reads the
        event with the prompt, in order, and reads one channel a step instead of two.
        """
        data = self.mark(line)
        if data is None or not _write_all(data):
            self.send_line(line)

    def mark(self, line: bytes) -> bytes | None:
        """`line` as a mark for the terminal (the debugger may write it with its prompt); None
        when it cannot go there (no terminal, no link, too long)."""
        mark = self._mark
        if mark is None or self._sock is None:
            return None
        data = mark + line[:-1] + protocol.MARK_END
        return data if len(data) <= protocol.MAX_MARK else None

    def _serve(self, sock: socket.socket, answer: Answerer) -> None:
        """Read requests until the core hangs up; `answer` answers each (on a thread of its own)."""
        buffer = b""
        readable = select.poll()
        readable.register(sock, select.POLLIN)
        while True:
            try:
                # Wait in poll, not in recv: a thread blocked in recv on a unix socket is woken
                # each time the core reads what this rank sent (a wake-up per rank per step).
                readable.poll()
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self._sock = None
                if not self._hung_up and self.on_lost is not None:
                    self.on_lost()  # the core hung up (or the network did), not this process
                return
            *lines, buffer = (buffer + chunk).split(b"\n")
            if len(buffer) > protocol.MAX_LINE:
                buffer = b""
            for line in lines:
                try:
                    message = protocol.decode(line)
                except ProtocolError:
                    continue
                if isinstance(message, Request):
                    answer(message, self.send)
                elif self.on_message is not None:
                    self.on_message(message)

    def close(self) -> None:
        """Hang up for good (a shutdown: the core sees the end even while forked children hold the socket)."""
        sock, self._sock = self._sock, None
        self._hung_up = True
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _forget(self) -> None:
        """In a forked child: the socket belongs to the parent, whose rank this process is not."""
        self._sock = self._mark = None


def _write_all(data: bytes) -> bool:
    """Write a mark to the terminal in one write; False when it did not all go."""
    try:
        return os.write(1, data) == len(data)
    except OSError:
        return False


def open_socket(address: str) -> socket.socket:
    """Connect to the core: `tcp:HOST:PORT` (`ddptui listen`, other nodes), else a unix socket path."""
    if not address.startswith(TCP_PREFIX):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.set_inheritable(False)
        try:
            sock.connect(address)
        except OSError:
            sock.close()
            raise
        return sock
    host, _, port = address[len(TCP_PREFIX) :].rpartition(":")
    sock = socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a prompt is one small write
    sock.set_inheritable(False)
    return sock


link = Link(os.environ.get(protocol.SOCKET_ENV), os.environ.get(protocol.TOKEN_ENV, ""))
"""The process-wide link (one per rank process)."""
