"""The core's end of the rank links: a unix socket (and, for `ddptui listen`, a TCP) server that
authenticates every connection.

A connection is believed only after its first message, a `Hello` with the session's token and
this protocol version. It is then bound to one rank by whoever accepts it, and everything it sends
is that rank's, whatever the message claims. Malformed lines are dropped with one log line each.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import os
import socket
import struct
from collections.abc import Callable
from typing import Any

from ddptui.core.transport.refusals import AcceptErrors, Refusals
from ddptui.rank import protocol
from ddptui.rank.asks import Ask
from ddptui.rank.protocol import Hello, Message, ProtocolError, Reply, Request, Welcome

HELLO_TIMEOUT = 10.0
"""Seconds a new connection has to say hello before it is dropped."""
RECV_SIZE = 1 << 16
"""Bytes one receive may fill: asyncio's plain protocols allocate 256 KiB for every receive, a
cost paid once per rank per lockstep step."""


class Connection(asyncio.BufferedProtocol):
    """One rank's link: lines in, decoded and checked; requests out, replies matched by id."""

    def __init__(self, server: ChannelServer) -> None:
        self._server = server
        self._recv = memoryview(bytearray(RECV_SIZE))
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._sink: Callable[[Message], None] | None = None
        self._replies: dict[int, asyncio.Future[Reply]] = {}
        self._ids = itertools.count(1)
        self._timer: asyncio.TimerHandle | None = None
        self.peer_pid = 0
        """The pid the kernel says is at the other end (SO_PEERCRED), not the one claimed."""
        self.peer = "an unknown peer"
        """Who connected, for log lines: `pid N` (unix socket) or `HOST:PORT` (TCP)."""
        self._fd = -1
        self.on_close: Callable[[], None] = lambda: None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Note the peer's real pid and give it HELLO_TIMEOUT to authenticate."""
        self._transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            self._fd = sock.fileno()
            if sock.family == socket.AF_UNIX:
                creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
                self.peer_pid = struct.unpack("3i", creds)[0]
                self.peer = f"pid {self.peer_pid}"
            else:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                host, port = transport.get_extra_info("peername")[:2]
                self.peer = f"{host}:{port}"
        self._server.connections.add(self)
        if self._server.accept_errors is not None:
            self._server.accept_errors.accepted()
        self._timer = asyncio.get_running_loop().call_later(HELLO_TIMEOUT, self._no_hello)

    def get_buffer(self, sizehint: int) -> memoryview:
        """The one receive buffer, reused for every receive."""
        return self._recv

    def buffer_updated(self, nbytes: int) -> None:
        """Handle every complete line; drop the connection if a line grows past MAX_LINE."""
        searched = len(self._buffer)
        self._buffer += self._recv[:nbytes]
        if self._buffer.find(b"\n", searched) < 0:
            if len(self._buffer) > protocol.MAX_LINE:
                self._refuse("a line longer than 1 MiB")
            return
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        for line in lines:
            if self._transport is None or self._transport.is_closing():
                return
            self._line(bytes(line))

    def read_now(self) -> None:
        """Read and handle what the peer already sent, now (the socket is non-blocking).

        A rank says `paused` just before it prints its prompt, and the loop can read the prompt
        first: its link's bytes may have arrived just after the loop last looked.
        """
        while self._fd >= 0 and self._transport is not None and not self._transport.is_closing():
            try:
                count = os.readv(self._fd, [self._recv])
            except OSError:  # nothing more yet (or an error the loop's own read will meet)
                return
            if not count:
                return  # the end: left for the loop's read, which sees it too
            self.buffer_updated(count)

    def _line(self, line: bytes) -> None:
        """Decode one line and route it: hello, reply, or an event for the bound rank."""
        try:
            message = protocol.decode(line)
        except ProtocolError as exc:
            if self._sink is None:
                self._refuse(f"no hello ({exc})")
            else:
                self._server.log(f"dropped a malformed message from {self.peer}: {exc}")
            return
        if self._sink is None:
            self._hello(message)
        elif isinstance(message, Reply):
            waiter = self._replies.pop(message.id, None)
            if waiter is not None and not waiter.done():
                waiter.set_result(message)
        elif not isinstance(message, Hello | Request):
            self._sink(message)

    def _hello(self, message: Message) -> None:
        """Authenticate the connection, then let the server bind it to a rank."""
        if self._timer is not None:
            self._timer.cancel()
        if not isinstance(message, Hello):
            self._refuse(f"{message.KIND} before hello")
        elif not hmac.compare_digest(message.token.encode(), self._server.token.encode()):
            self._refuse("wrong token")
        elif message.version != protocol.VERSION:
            self._refuse(
                f"rank {message.identity.rank} speaks ddptui protocol v{message.version}, this ddptui "
                f"speaks v{protocol.VERSION}: run the ranks with the same ddptui as the front end"
            )
        else:
            self._server.accept(self, message)

    def bind(self, sink: Callable[[Message], None]) -> None:
        """Take the rank: say so (`Welcome`, before anything else is sent to it), and from now on
        every event on this connection goes to `sink`."""
        self.send(Welcome())
        self._sink = sink

    def turn_away(self, why: str) -> None:
        """Refuse an authenticated rank: tell it why (it runs undebugged), then close."""
        self.send(Welcome(refused=why))
        self.close()

    def send(self, message: Message) -> None:
        """Send one message that wants no reply (a relayed rank's `Input`, `Resize`); dropped once closed."""
        if self._transport is not None and not self._transport.is_closing():
            self._transport.write(message.encode())

    async def request(self, ask: Ask[Any], timeout: float) -> Reply:
        """Send a request and wait for its reply; TimeoutError after `timeout` (+ a margin)."""
        if self._transport is None or self._transport.is_closing():
            raise ConnectionError("the rank's link is closed")
        number = next(self._ids)
        waiter: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._replies[number] = waiter
        self._transport.write(Request(number, ask.KIND, ask.args(), timeout).encode())
        try:
            return await asyncio.wait_for(waiter, timeout + 1.0)
        finally:
            self._replies.pop(number, None)

    def _no_hello(self) -> None:
        """Drop a connection that never authenticated."""
        if self._sink is None:
            self._refuse("no hello in time")

    def _refuse(self, why: str) -> None:
        """Close an unauthenticated connection and log the attempt."""
        self._server.refusals.refused(f"refused a connection from {self.peer}: {why}")
        self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Read what the rank sent last, then forget the connection; pending requests fail."""
        if exc is not None:
            self._read_rest()
        self._server.connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
        for waiter in self._replies.values():
            if not waiter.done():
                waiter.set_exception(ConnectionError("the rank's link closed"))
        self._replies.clear()
        self.on_close()

    def _read_rest(self) -> None:
        """Take the lines still unread when a write failed (the rank hung up as a request went out).

        asyncio stops reading a transport whose write failed, leaving what the rank sent just
        before it closed (its `Exited`) unread; the socket stays open until this returns.
        """
        while self._fd >= 0 and self._sink is not None:
            try:
                data = os.read(self._fd, 65536)
            except OSError:
                return
            if not data:
                return
            *lines, rest = (self._buffer + data).split(b"\n")
            self._buffer = bytearray(rest)
            for line in lines:
                self._line(bytes(line))

    def close(self) -> None:
        """Drop the connection."""
        if self._transport is not None:
            self._transport.close()


class ChannelServer:
    """Accepts rank connections on a 0600 socket in a 0700 directory (and on TCP when asked); hands
    good hellos on. Over TCP the token is all that admits a connection: no pid is known."""

    def __init__(
        self,
        path: str,
        token: str,
        on_hello: Callable[[Connection, Hello], str | None],
        log: Callable[[str], None],
    ) -> None:
        self.path = path
        self.token = token
        self.on_hello = on_hello
        self.log = log
        self.connections: set[Connection] = set()
        self._server: asyncio.AbstractServer | None = None
        self._tcp: asyncio.AbstractServer | None = None
        self.refusals = Refusals(log)
        """Unauthenticated peers, said a few at a time (a flood is one count)."""
        self.accept_errors: AcceptErrors | None = None
        """A full descriptor table said once per episode, while the server listens."""

    async def start(self) -> None:
        """Listen on the socket path, readable and writable by this user only."""
        loop = asyncio.get_running_loop()
        old = os.umask(0o177)
        try:
            self._server = await loop.create_unix_server(lambda: Connection(self), self.path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        self._watch_accepts(loop)

    def _watch_accepts(self, loop: asyncio.AbstractEventLoop) -> None:
        """Say a full descriptor table in one line, not a traceback per failed accept (once)."""
        if self.accept_errors is None:
            self.accept_errors = AcceptErrors(loop, self.log)

    async def listen_tcp(self, host: str, port: int) -> tuple[str, int]:
        """Also accept ranks over TCP on `host`:`port` (`ddptui listen`); returns the address bound."""
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(self), host, port, reuse_address=True)
        self._tcp = server
        self._watch_accepts(loop)
        bound = server.sockets[0].getsockname()
        return str(bound[0]), int(bound[1])

    def accept(self, connection: Connection, hello: Hello) -> None:
        """Bind an authenticated connection to its rank (`on_hello`), or turn it away with the
        reason `on_hello` gives, said in one line."""
        why = self.on_hello(connection, hello)
        if why is not None:
            self.log(f"rank {hello.identity.rank} ({connection.peer}) refused: {why}; it runs undebugged")
            connection.turn_away(why)

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        servers = [server for server in (self._server, self._tcp) if server is not None]
        for server in servers:
            server.close()
        for connection in list(self.connections):
            connection.close()
        for server in servers:
            await server.wait_closed()
        self.refusals.flush()
        if self.accept_errors is not None:
            self.accept_errors.close()
