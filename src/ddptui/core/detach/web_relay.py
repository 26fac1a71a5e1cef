"""`ddptui join --web ID`: one browser tab's view of a detached session, for `ddptui serve`.

textual-serve starts this process for each tab that opens the page and speaks Textual's web
driver protocol with it: on standard output `__GANGLION__` once, then packets `D` (terminal
bytes for xterm.js) and `M` (JSON meta; `exit` closes the tab's connection), each a kind byte,
a 4-byte big-endian length and the payload; on standard input the same packets: `D` is what the
tab typed, `M` a `resize`, or `quit` when the tab has gone. The relay is a watching client of
the session (`Watch`, `Keys`, `Size` in; `Screen`, `Leave`, `Ended` out), as `ddptui join` in a
terminal is; it writes the session's leaving or summary as a last line, then `exit`.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
from collections.abc import Iterator, Mapping
from types import FrameType
from typing import BinaryIO

from ddptui.core.detach import places, viewer, wire
from ddptui.core.detach.client import Client, JoinError
from ddptui.core.detach.places import PlaceError

GANGLION = b"__GANGLION__\n"
"""The first line textual-serve waits for: what follows are packets."""
DATA, META = b"D", b"M"
HEADER = 5
"""A packet's kind byte and its 4-byte length."""
MAX_PACKET = wire.MAX_LINE
DEFAULT_SIZE = (80, 24)


class Stopped(Exception):
    """A signal ends the relay (the server stops, or its terminal's Ctrl+C)."""


class Packets:
    """textual-serve's packets read from a byte stream as they come whole."""

    def __init__(self) -> None:
        self._buffer = bytearray()

    def feed(self, data: bytes) -> Iterator[tuple[bytes, bytes]]:
        """The packets (kind, payload) that `data` completes (ValueError for an overlong one)."""
        self._buffer += data
        while len(self._buffer) >= HEADER:
            size = int.from_bytes(self._buffer[1:HEADER], "big")
            if size > MAX_PACKET:
                raise ValueError(f"a packet of {size} bytes")
            if len(self._buffer) < HEADER + size:
                return
            kind, payload = bytes(self._buffer[:1]), bytes(self._buffer[HEADER : HEADER + size])
            del self._buffer[: HEADER + size]
            yield kind, payload


def packet(kind: bytes, payload: bytes) -> bytes:
    """One packet of textual-serve's protocol."""
    return kind + len(payload).to_bytes(4, "big") + payload


def size_from(environ: Mapping[str, str]) -> tuple[int, int]:
    """The tab's terminal size textual-serve gives in COLUMNS and ROWS (80x24 without them)."""
    try:
        return int(environ["COLUMNS"]), int(environ["ROWS"])
    except (KeyError, ValueError):
        return DEFAULT_SIZE


class Tab:
    """The relay between one tab (this process's standard streams) and the session."""

    def __init__(self, out: BinaryIO, fd_in: int = 0) -> None:
        self.out = out
        self.fd_in = fd_in
        self.left = viewer.Left()
        self.closed = False
        """The tab has gone (`quit`, or its end of standard input closed)."""

    def show(self, data: bytes) -> None:
        """Terminal bytes to the tab."""
        self.out.write(packet(DATA, data))
        self.out.flush()

    def exit(self) -> None:
        """Make textual-serve close the tab's connection."""
        self.out.write(packet(META, json.dumps({"type": "exit"}).encode()))
        self.out.flush()

    def watch(self, client: Client, columns: int, lines: int) -> None:
        """Show the session's app in the tab until the session, the tab or a signal ends it."""
        client.send(wire.Watch(columns, lines, False))
        self.show(viewer.ENTER.encode())
        messages, packets, sock = client.pending(), Packets(), client.fileno()
        while not self._take(messages) and not self.closed:
            messages = []
            ready = select.select([self.fd_in, sock], [], [])[0]
            if self.fd_in in ready:
                data = os.read(self.fd_in, viewer.READ_SIZE)
                if not data:
                    self.closed = True
                try:
                    for kind, payload in packets.feed(data):
                        self._typed(client, kind, payload)
                except ValueError as exc:
                    self.left.lost = f"the tab sent {exc}, not textual-serve's packets"
            if sock in ready:
                try:
                    messages = client.received()
                except JoinError as exc:
                    self.left.lost = str(exc)
                    return

    def _take(self, messages: list[wire.Message]) -> bool:
        """Show what the session sent; True when the view is to leave."""
        return viewer.take(messages, self.show, self.left) or bool(self.left.lost)

    def _typed(self, client: Client, kind: bytes, payload: bytes) -> None:
        """A packet from the tab: keys, a new size, or its leaving."""
        try:
            if kind == DATA:
                client.send(wire.Keys(wire.encode_bytes(payload)))
            elif kind == META:
                meta = json.loads(payload)
                if meta.get("type") == "resize":
                    client.send(wire.Size(int(meta["width"]), int(meta["height"])))
                elif meta.get("type") in ("quit", "exit"):
                    self.closed = True
        except (ValueError, KeyError, TypeError, AttributeError):
            pass  # a packet of another version of textual-serve: not this tab's keys
        except OSError as exc:
            self.left.lost = f"the session is gone ({exc.strerror or exc})"

    def last_line(self, session: str) -> str:
        """What the tab shows last: the summary, the detach, or why the session was lost."""
        if self.left.ended is not None:
            return "".join(f"{text}\r\n" for text in self.left.ended.summary)
        if self.left.detached:
            return f"ddptui: detached from session {session}: reload the page to open it again\r\n"
        if self.left.lost:
            return f"ddptui: error: session {session}: {self.left.lost}\r\n"
        return ""


def relay(session: str | None, out: BinaryIO, fd_in: int = 0, environ: Mapping[str, str] = os.environ) -> int:
    """Relay one tab to the session until either leaves; 0, or 2 when the session cannot be reached."""
    out.write(GANGLION)
    out.flush()
    tab = Tab(out, fd_in)
    old = {sig: signal.signal(sig, _stop) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    status = 0
    try:
        status = _joined(tab, session, environ)
    except (Stopped, BrokenPipeError):
        pass  # the server stops, or has gone: the session stays as it is
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    with contextlib.suppress(OSError):
        tab.exit()
    return status


def _joined(tab: Tab, session: str | None, environ: Mapping[str, str]) -> int:
    """Join the session and relay the tab to it; 2 (said in the tab) when it cannot be reached."""
    try:
        client = Client(places.find(session))
    except (PlaceError, JoinError) as exc:
        tab.show(f"ddptui: error: {exc}\r\n".encode())
        return 2
    try:
        try:
            tab.watch(client, *size_from(environ))
        except OSError as exc:  # the session's socket, or the tab's end of standard input
            tab.left.lost = f"the session is gone ({exc.strerror or exc})"
        if not tab.closed:
            tab.show(viewer.LEAVE.encode() + tab.last_line(client.entry.id).encode())
    finally:
        client.close()
    return 0


def _stop(signum: int, _: FrameType | None) -> None:
    """A signal: leave the session as it is."""
    raise Stopped(signum)
