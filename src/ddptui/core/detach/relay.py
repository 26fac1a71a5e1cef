"""The transcript's stream in a detached session: text goes to the client whose line runs.

Text printed while no line runs (a verdict found between lines, the ranks' first prompts) is
kept for the next line's client, up to `KEPT` characters: the next client sees what it missed.
"""

from __future__ import annotations

import io
from collections.abc import Callable

from ddptui.core.detach.wire import Message, Output

KEPT = 1 << 20
"""Characters of text kept while no client's line runs; the oldest go first."""
CHUNK = 1 << 16
"""Characters of text in one `Output`: escaped at most 6 bytes each (`\\u001b`), under `MAX_LINE`."""
DROPPED = "ddptui: ... earlier text not kept while no client was joined\n"


class Joined:
    """A client on the session's socket: sends messages to it (a client gone takes nothing)."""

    def __init__(self, send: Callable[[bytes], None]) -> None:
        self._send = send
        self.gone = False

    def send(self, message: Message) -> None:
        """Send one message, unless the client has left."""
        if not self.gone:
            self._send(message.encode())


def send_text(client: Joined, text: str) -> None:
    """Send transcript text as `Output`s of at most `CHUNK` characters (each one line under
    `wire.MAX_LINE`, however much JSON escapes it)."""
    for start in range(0, len(text), CHUNK):
        client.send(Output(text[start : start + CHUNK]))


class Relay(io.TextIOBase):
    """A text stream whose flushed text is an `Output` to the client of the running line."""

    def __init__(self) -> None:
        super().__init__()
        self.client: Joined | None = None
        """The client whose line runs (None between lines)."""
        self._written: list[str] = []
        self._kept: list[str] = []
        self._kept_size = 0
        self._dropped = False

    def writable(self) -> bool:
        """Always: it is an output stream."""
        return True

    def write(self, text: str) -> int:
        """Take text; it is sent at the next `flush`."""
        self._written.append(text)
        return len(text)

    def flush(self) -> None:
        """Send what was written to the running line's client, or keep it for the next one."""
        text = "".join(self._written)
        self._written.clear()
        if not text:
            return
        if self.client is None:
            self._keep(text)
        else:
            send_text(self.client, text)

    def to(self, client: Joined | None) -> None:
        """Send what follows to `client` (None: keep it), first what was kept for it."""
        self.flush()
        self.client = client
        if client is None or not self._kept:
            return
        kept = (DROPPED if self._dropped else "") + "".join(self._kept)
        self._kept, self._kept_size, self._dropped = [], 0, False
        send_text(client, kept)

    def _keep(self, text: str) -> None:
        """Keep text for the next client, dropping the oldest past `KEPT` characters."""
        self._kept.append(text)
        self._kept_size += len(text)
        while self._kept_size > KEPT and len(self._kept) > 1:
            self._kept_size -= len(self._kept.pop(0))
            self._dropped = True
