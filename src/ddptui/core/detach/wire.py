"""The protocol between a detached session and its clients: typed messages as JSON lines.

Every client speaks it, whatever it shows: `ddptui join --batch`, `ddptui join` in a terminal,
and the browser's tab. A client's first message is a `Hello` with the session's token; a
connection whose token is wrong gets nothing back at all (closed, zero bytes sent). A good hello
of another protocol version is `Refused` in one line; else the session says `Welcome` and takes
`Line`s (each run exactly as `--batch` runs a line, one at a time across clients, in arrival
order), `Status` and `Kill`. What a line prints comes back as `Output`, then `Done`. A client
that shows the app sends `Watch` with its terminal's size: from then on it is sent the app's
screen as `Screen` bytes and sends its keys as `Keys` (and `Size` when its terminal is resized),
until it says `Bye` or the session sends it `Leave` (its user pressed Ctrl+D). When the job ends
every client is sent `Ended` with the summary.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from ddptui.rank import typed_json
from ddptui.rank.protocol import ProtocolError

VERSION = 2
"""Bumped on any incompatible change of a message."""
MAX_LINE = 1 << 20
"""Longest message accepted, in bytes."""


class WireError(ValueError):
    """A line that is not a well-formed message of this protocol."""


class Message:
    """Base of every message; `KIND` is its tag on the wire."""

    KIND: ClassVar[str] = ""

    def encode(self) -> bytes:
        """One JSON line."""
        body: dict[str, Any] = {"k": self.KIND, **typed_json.write(self)}
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"


@dataclass(frozen=True)
class Hello(Message):
    """Client → session, first: the token from the session's file and this protocol's version."""

    KIND: ClassVar[str] = "hello"
    token: str
    version: int


@dataclass(frozen=True)
class Line(Message):
    """Client → session: one batch line (a pdb command or a `:` command) to run."""

    KIND: ClassVar[str] = "line"
    text: str


@dataclass(frozen=True)
class Status(Message):
    """Client → session: how its ranks are (answered by `Report`, at once, between lines too)."""

    KIND: ClassVar[str] = "status"


@dataclass(frozen=True)
class Kill(Message):
    """Client → session: end the session and every rank now (answered by `Ended`)."""

    KIND: ClassVar[str] = "kill"


@dataclass(frozen=True)
class Bye(Message):
    """Client → session: this client leaves; the session and its ranks stay as they are."""

    KIND: ClassVar[str] = "bye"


@dataclass(frozen=True)
class Watch(Message):
    """Client → session: show this client the app, on a terminal of this size. The `owner` is the
    terminal that started the session (`ddptui SCRIPT`): its going away without a detach ends it."""

    KIND: ClassVar[str] = "watch"
    columns: int
    lines: int
    owner: bool


@dataclass(frozen=True)
class Keys(Message):
    """Client → session: what its user typed (terminal input bytes, base64: `encode_bytes`)."""

    KIND: ClassVar[str] = "keys"
    data: str


@dataclass(frozen=True)
class Size(Message):
    """Client → session: its terminal has a new size."""

    KIND: ClassVar[str] = "size"
    columns: int
    lines: int


@dataclass(frozen=True)
class Welcome(Message):
    """Session → client: the hello is taken."""

    KIND: ClassVar[str] = "welcome"
    session: str


@dataclass(frozen=True)
class Refused(Message):
    """Session → client: a good token with something else wrong (the version), and why."""

    KIND: ClassVar[str] = "refused"
    reason: str


@dataclass(frozen=True)
class Output(Message):
    """Session → client: transcript text, as `--batch` prints it."""

    KIND: ClassVar[str] = "output"
    text: str


@dataclass(frozen=True)
class Done(Message):
    """Session → client: the client's line has settled and everything it printed was sent."""

    KIND: ClassVar[str] = "done"


@dataclass(frozen=True)
class Screen(Message):
    """Session → watching client: what the app wrote to its terminal (bytes, base64)."""

    KIND: ClassVar[str] = "screen"
    data: str


@dataclass(frozen=True)
class Leave(Message):
    """Session → watching client: its user detached (Ctrl+D, `:detach`): restore the terminal and go."""

    KIND: ClassVar[str] = "leave"


@dataclass(frozen=True)
class Report(Message):
    """Session → client: the answer to `Status`, one entry per rank state (`0-3: paused at t.py:9`),
    and how many terminals (or browser tabs) show the app."""

    KIND: ClassVar[str] = "report"
    ranks: tuple[str, ...]
    watching: int


@dataclass(frozen=True)
class Ended(Message):
    """Session → every client: the job ended; its summary lines and the exit status `--batch`
    would give."""

    KIND: ClassVar[str] = "ended"
    summary: tuple[str, ...]
    status: int


KINDS: dict[str, type[Message]] = {
    kind.KIND: kind
    for kind in (
        Hello, Line, Status, Kill, Bye, Watch, Keys, Size,
        Welcome, Refused, Output, Done, Screen, Leave, Report, Ended,
    )
}  # fmt: skip


def encode_bytes(data: bytes) -> str:
    """Bytes as the text of a `Keys` or `Screen` message."""
    return base64.b64encode(data).decode("ascii")


def decode_bytes(text: str) -> bytes:
    """The bytes of a `Keys` or `Screen` message (WireError if it is not base64)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise WireError("bytes that are not base64") from None


def decode(line: bytes) -> Message:
    """The message on one line; WireError for anything else (fields checked by their types)."""
    try:
        body = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WireError(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("k") not in KINDS:
        raise WireError("not a message of this protocol")
    kind = KINDS[body.pop("k")]
    try:
        return typed_json.read_object(kind, body, kind.KIND)  # type: ignore[no-any-return]
    except ProtocolError as exc:
        raise WireError(str(exc)) from None
