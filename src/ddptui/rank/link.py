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
from ddptui.rank.protocol import TCP_PREFIX, Hello, Identity, Message, ProtocolError, Request, Welcome

CONNECT_TIMEOUT = 10.0
"""Seconds a rank tries to reach a `ddptui listen` over TCP before it runs undebugged."""
WELCOME_TIMEOUT = 300.0
"""Seconds a rank waits for the core's answer to its hello before it runs undebugged. A core that
starts hundreds of ranks on a few cores answers the first ones late (tens of seconds); a core that
is gone closes the link, which ends the wait at once."""
RESTART_COUNT_ENV = "TORCHELASTIC_RESTART_COUNT"
"""How often torchrun restarted its workers before this one (said in the hello)."""

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
        self._sink: Callable[[Message], None] | None = None
        self._early: list[Message] = []
        """Messages that came before `on_message` was set (a size, sent as the core took the rank)."""
        self._sink_lock = threading.Lock()
        self.on_lost: Callable[[], None] | None = None
        """Called on the link's thread when the core hangs up first (it quit, or the network failed)."""
        self.refused: str | None = None
        """Why the core did not take this process as a rank (it runs undebugged), once it said so."""
        os.register_at_fork(after_in_child=self._forget)

    @property
    def on_message(self) -> Callable[[Message], None] | None:
        """Called on the link's thread with every message from the core that is not a `Request`."""
        return self._sink

    @on_message.setter
    def on_message(self, sink: Callable[[Message], None] | None) -> None:
        """Set the receiver, and hand it what came before it, first."""
        with self._sink_lock:
            self._sink = sink
            early, self._early = self._early, []
            for message in early if sink is not None else ():
                sink(message)  # type: ignore[misc]

    @property
    def connected(self) -> bool:
        """True while the core is reachable (after a good `connect`, until either side hangs up)."""
        return self._sock is not None

    def connect(self, identity: Identity, answer: Answerer) -> None:
        """Say hello, wait for the core to take this process as its rank, then serve requests
        through `answer`; a failure or a refusal leaves the rank undebugged, not dead."""
        if not self._path or self.refused is not None:
            return
        try:
            sock = open_socket(self._path)
        except (OSError, ValueError):
            return
        restarts = os.environ.get(RESTART_COUNT_ENV, "")
        hello = Hello(protocol.VERSION, self._token, identity, int(restarts) if restarts.isdigit() else 0)
        try:
            sock.sendall(hello.encode())
            rest = _welcomed(sock)
        except (OSError, ProtocolError) as exc:
            self.refused = str(exc) or "no answer"
            sock.close()
            return
        self._sock = sock
        self._mark_prefix = protocol.MARK_INTRO + protocol.mark_key(self._token) + b";"
        self.terminal_changed()
        serve = threading.Thread(
            target=self._serve, args=(sock, answer, rest), name="ddptui-link", daemon=True
        )
        serve.start()

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

    def _serve(self, sock: socket.socket, answer: Answerer, chunk: bytes = b"") -> None:
        """Read requests until the core hangs up; `answer` answers each (on a thread of its own).
        `chunk`: what the core sent after its welcome, read with it."""
        buffer = b""
        readable = select.poll()
        readable.register(sock, select.POLLIN)
        while True:
            *lines, buffer = (buffer + chunk).split(b"\n")
            if len(buffer) > protocol.MAX_LINE:
                buffer = b""
            for line in lines:
                self._handle(line, answer)
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

    def _handle(self, line: bytes, answer: Answerer) -> None:
        """One line from the core: a request to answer, or a message for `on_message`."""
        try:
            message = protocol.decode(line)
        except ProtocolError:
            return
        if isinstance(message, Request):
            answer(message, self.send)
            return
        with self._sink_lock:
            sink = self._sink
            if sink is None:
                self._early = [*self._early[-15:], message]
                return
        sink(message)

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


def _welcomed(sock: socket.socket) -> bytes:
    """Read the core's `Welcome`; return what came after it. Raises ProtocolError (the core's
    reason, or what went wrong) unless the core took this process as its rank."""
    sock.settimeout(WELCOME_TIMEOUT)
    data = b""
    while b"\n" not in data:
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            raise ProtocolError(f"ddptui did not answer in {WELCOME_TIMEOUT:g} s") from None
        if not chunk:
            raise ProtocolError("ddptui closed the link")
        data += chunk
        if len(data) > protocol.MAX_LINE:
            raise ProtocolError("ddptui's answer is too long")
    sock.settimeout(None)
    line, _, rest = data.partition(b"\n")
    welcome = protocol.decode(line)
    if not isinstance(welcome, Welcome):
        raise ProtocolError(f"ddptui answered {welcome.KIND}")
    if welcome.refused:
        raise ProtocolError(welcome.refused)
    return rest


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
