"""The core's end of the side channel: a unix socket server decoding JSON-line events."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

Event = dict[str, object]


class ChannelServer:
    """Accepts rank connections and hands each decoded event to `on_event`."""

    def __init__(self, path: str, on_event: Callable[[Event], None]) -> None:
        self.path = path
        self._on_event = on_event
        self._server: asyncio.AbstractServer | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen on the socket path."""
        self._server = await asyncio.start_unix_server(self._serve, self.path, limit=1 << 20)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Read events from one connection until it closes; garbage lines are ignored."""
        self._writers.add(writer)
        try:
            while line := await reader.readline():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    self._on_event(event)
        except (ConnectionError, asyncio.LimitOverrunError, ValueError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def close(self) -> None:
        """Stop listening and drop every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._writers):
            writer.close()
        if self._server is not None:
            await self._server.wait_closed()
