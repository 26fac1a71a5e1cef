"""The rank's end of the link to the core: events out, requests in, over one unix socket.

Why a socket and not text on the pty: "at the prompt" cannot be told reliably from terminal bytes
(typeahead, threads printing, user output that looks like a prompt). The socket's path and the
session's token come in the environment, which survives torchrun and mp.spawn (an inherited fd
does not). Requests are read and answered by ddptui threads, so they are served whatever the
main thread does: sitting at a prompt, blocked in a collective, or running the user's code.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable

from ddptui.rank import protocol
from ddptui.rank.protocol import Hello, Identity, Message, ProtocolError, Request


class Link:
    """A best-effort connection to the core; silent when no ddptui core is listening."""

    def __init__(self, path: str | None, token: str) -> None:
        self._path = path
        self._token = token
        self._sock: socket.socket | None = None
        self._lock = threading.Lock()
        self.on_message: Callable[[Message], None] | None = None
        """Called on the link's thread with every message from the core that is not a `Request`."""
        os.register_at_fork(after_in_child=self._forget)

    @property
    def connected(self) -> bool:
        """True while the core is reachable (after a good `connect`, until either side hangs up)."""
        return self._sock is not None

    def connect(self, identity: Identity) -> None:
        """Say hello and start serving requests; a failure leaves the rank undebugged, not dead."""
        if not self._path:
            return
        try:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.set_inheritable(False)
            sock.connect(self._path)
        except OSError:
            return
        self._sock = sock
        self.send(Hello(protocol.VERSION, self._token, identity))
        threading.Thread(target=self._serve, args=(sock,), name="ddptui-link", daemon=True).start()

    def send(self, message: Message) -> None:
        """Send one message; never raises, because the debugged program must not die of the debugger."""
        sock = self._sock
        if sock is None:
            return
        data = message.encode()
        with self._lock:
            try:
                sock.sendall(data)
            except OSError:
                self._sock = None

    def _serve(self, sock: socket.socket) -> None:
        """Read requests until the core hangs up; answer each on a thread of its own."""
        from ddptui.rank import requests  # only a debugged rank pays for it

        buffer = b""
        while True:
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                self._sock = None
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
                    requests.answer_later(message, self.send)
                elif self.on_message is not None:
                    self.on_message(message)

    def close(self) -> None:
        """Hang up for good (a shutdown: the core sees the end even while forked children hold the socket)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _forget(self) -> None:
        """In a forked child: the socket belongs to the parent, whose rank this process is not."""
        self._sock = None


link = Link(os.environ.get(protocol.SOCKET_ENV), os.environ.get(protocol.TOKEN_ENV, ""))
"""The process-wide link (one per rank process)."""
