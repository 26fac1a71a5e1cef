"""The core's end of the side channel: a unix socket server decoding JSON-line events.

A plain `asyncio.Protocol`: events are dispatched straight from `data_received`, with no task
wake-up per line (every lockstep step is two events per rank).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

Event = dict[str, object]
MAX_LINE = 1 << 20
"""A connection sending a longer line is garbage and is dropped."""


class _Connection(asyncio.Protocol):
    """One rank's connection: split lines, decode JSON, hand dicts on."""

    def __init__(self, server: ChannelServer) -> None:
        self._server = server
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Remember the transport so the server can close it."""
        self._transport = transport  # type: ignore[assignment]
        self._server.connections.add(self)

    def data_received(self, data: bytes) -> None:
        """Dispatch every complete line; ignore lines that are not JSON objects."""
        self._buffer += data
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                self._server.on_event(event)
        if len(self._buffer) > MAX_LINE:
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Forget the connection."""
        self._server.connections.discard(self)

    def close(self) -> None:
        """Drop the connection."""
        if self._transport is not None:
            self._transport.close()


class ChannelServer:
    """Accepts rank connections and hands each decoded event to `on_event`."""

    def __init__(self, path: str, on_event: Callable[[Event], None]) -> None:
        self.path = path
        self.on_event = on_event
        self.connections: set[_Connection] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        """Listen on the socket path."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_unix_server(lambda: _Connection(self), self.path)

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for connection in list(self.connections):
            connection.close()
        if self._server is not None:
            await self._server.wait_closed()
