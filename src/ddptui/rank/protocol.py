"""The rank ↔ core protocol: typed, versioned messages as JSON lines. Standard library only.

Imported by both sides. Ranks send events (`Hello`, `Paused`, `Running`, `Crashed`, `Exited`) and
`Reply`s; the core answers the hello (`Welcome`: taken, or refused and why) and sends `Request`s,
each answered by one `Reply` with the same id. Ranks of a job ddptui did not spawn carry their
terminal over the link too (`Output` out, `Input` and `Resize` in), and a rank that starts ranks
of its own says so (`StartsRanks`). The first message of every connection is a `Hello` carrying
the session's secret token: nothing sent before a good `Hello`, or on a connection whose token is
wrong, is believed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, ClassVar

from ddptui.rank.paths import short_path

VERSION = 2
"""Bumped on any incompatible change of a message (2: the core answers every hello with a `Welcome`)."""

SOCKET_ENV = "DDPTUI_SOCKET"
"""Environment variable holding where the core listens: its unix socket's path, or `tcp:HOST:PORT`."""
TCP_PREFIX = "tcp:"
TOKEN_ENV = "DDPTUI_TOKEN"
"""Environment variable holding the session's secret token."""
STATE_DIR_ENV = "DDPTUI_DIR"
"""Environment variable holding the session's private directory (0700)."""
RANK_ENV = "DDPTUI_RANK"
"""Environment variable holding the global rank ddptui gave this process."""
PLAIN_INPUT_ENV = "DDPTUI_PLAIN_INPUT"
"""How pdb reads commands in a rank ddptui starts: `1` (`--batch`, where no one types into the
ranks' terminals) as plain lines, as the terminal's line discipline hands them over, instead of
through readline, whose terminal set-up and tear-down around every prompt cost a rank about 40 %
of its CPU a step; `PLAIN_UNTIL_EDITED` as plain lines until the core asks for readline (`edit`),
for keys a person types. Unset: readline, as stock pdb."""
PLAIN_UNTIL_EDITED = "until-edited"

MAX_LINE = 1 << 20
"""Longest message accepted, in bytes; a longer line is garbage."""

MARK_INTRO = b"\x1b]5379;"
"""How a `paused` sent on the rank's terminal begins: an OSC sequence, `INTRO KEY ; JSON BEL`.

A rank at a prompt it prints itself says `paused` in its terminal, just before the prompt, instead
of on the link: the core then reads one channel a step, not two, and the event can never arrive
after the prompt it announces. `KEY` (see `mark_key`) tells it from anything the program prints.
"""
MARK_END = b"\x07"
MAX_MARK = 1024
"""Longest mark a rank writes (a longer `paused` goes over the link): a tty write this short is
never split by another thread's output."""


def mark_key(token: str) -> bytes:
    """The key of a session's terminal marks: derived from the token, which it never reveals."""
    import hashlib  # once a rank, at connect

    return hashlib.sha256(b"ddptui terminal mark\0" + token.encode()).hexdigest()[:24].encode()


class ProtocolError(ValueError):
    """A line that is not a well-formed message of this protocol version."""


@dataclass(frozen=True)
class Frame:
    """A source position: file, line and function. Used wherever a location travels or is shown."""

    file: str
    line: int
    func: str = ""

    def __str__(self) -> str:
        """`train.py:12`, the form shown everywhere."""
        return f"{short_path(self.file)}:{self.line}"

    def to_json(self) -> list[Any]:
        """`[file, line, func]`, the compact wire form."""
        return [self.file, self.line, self.func]

    @classmethod
    def from_json(cls, value: Any) -> Frame:
        """Decode `[file, line, func]`; raise ProtocolError on anything else."""
        if (
            isinstance(value, list)
            and len(value) == 3
            and isinstance(value[0], str)
            and isinstance(value[1], int)
            and isinstance(value[2], str)
        ):
            return cls(value[0], value[1], value[2])
        raise ProtocolError(f"not a frame: {value!r:.80}")


@dataclass(frozen=True)
class Identity:
    """Who a rank is: what `Hello` says, and what pane titles and `:state` show."""

    rank: int
    local_rank: int
    world_size: int
    host: str
    pid: int


class Message:
    """Base of every message; `KIND` is its tag on the wire."""

    KIND: ClassVar[str] = ""

    def encode(self) -> bytes:
        """One JSON line."""
        body: dict[str, Any] = {"k": self.KIND}
        for name, _, _ in _fields(type(self)):
            body[name] = _to_json(getattr(self, name))
        return json.dumps(body, separators=(",", ":")).encode() + b"\n"


_FIELDS: dict[type, tuple[tuple[str, str, bool], ...]] = {}


def _fields(cls: type[Message]) -> tuple[tuple[str, str, bool], ...]:
    """A message class's fields as (name, annotation, required), worked out once per class."""
    found = _FIELDS.get(cls)
    if found is None:
        found = _FIELDS[cls] = tuple(
            (f.name, str(f.type), f.default is MISSING and f.default_factory is MISSING)
            for f in fields(cls)  # type: ignore[arg-type]
        )
    return found


@functools.lru_cache(maxsize=1024)
def _quoted(text: str) -> str:
    """A string as a JSON literal (files and functions repeat from step to step)."""
    return json.dumps(text)


def _to_json(value: Any) -> Any:
    """Frames and identities in their wire form; everything else as it is."""
    if isinstance(value, Frame):
        return value.to_json()
    if isinstance(value, Identity):
        return [value.rank, value.local_rank, value.world_size, value.host, value.pid]
    if isinstance(value, tuple):
        return [_to_json(item) for item in value]
    return value


@dataclass(frozen=True)
class Hello(Message):
    """First message of a connection: protocol version, token, and who the rank is."""

    KIND: ClassVar[str] = "hello"
    version: int
    token: str
    identity: Identity
    restarts: int = 0
    """How often the job's launcher restarted its workers before this one (torchrun's
    `TORCHELASTIC_RESTART_COUNT`)."""


@dataclass(frozen=True)
class Welcome(Message):
    """The core's answer to a `Hello`, its first message on a link: the rank is taken, or `refused`
    says why not (the rank then runs undebugged, and its `breakpoint()` stops nothing)."""

    KIND: ClassVar[str] = "welcome"
    refused: str = ""


@dataclass(frozen=True)
class Paused(Message):
    """The debugger's prompt is open at `frame` (`depth` frames deep in the user's stack). The first
    event of a stop says `why` it opened: `breakpoint` (a pdb breakpoint or a hard-coded
    `breakpoint()`), `post-mortem`, `interrupt` (SIGINT), or empty (a command's step ended there,
    or ddptui stopped it: `:until-collective`); the events that follow while the prompt stays
    open (after `p`, `up`) say nothing."""

    KIND: ClassVar[str] = "paused"
    frame: Frame
    post_mortem: bool = False
    depth: int = 0
    why: str = ""

    def encode(self) -> bytes:
        """The line `Message.encode` makes (see `paused_line`)."""
        frame = self.frame
        return paused_line(frame.file, frame.line, frame.func, self.post_mortem, self.depth, self.why)


@functools.lru_cache(maxsize=1024)
def paused_line(file: str, line: int, func: str, post_mortem: bool, depth: int, why: str = "") -> bytes:
    """A `Paused`'s line, formatted directly: a rank sends one every step, with its caches cold,
    and building it through dataclasses and `json.dumps` would be a large share of a RankPdb step.
    Kept: a loop stops at the same few lines again and again."""
    return (
        f'{{"k":"paused","frame":[{_quoted(file)},{line or 0:d},{_quoted(func)}],'
        f'"post_mortem":{"true" if post_mortem else "false"},"depth":{depth:d},"why":{_quoted(why)}}}\n'
    ).encode()


@dataclass(frozen=True)
class Running(Message):
    """A debugger command resumed the program."""

    KIND: ClassVar[str] = "running"
    command: str = ""


@dataclass(frozen=True)
class Crashed(Message):
    """The user's code raised an uncaught exception; `frames` outermost first."""

    KIND: ClassVar[str] = "exception"
    type: str
    message: str
    frames: tuple[Frame, ...] = ()


@dataclass(frozen=True)
class Exited(Message):
    """The user's code finished; the process exits with `code`. `collectives`: its collective log."""

    KIND: ClassVar[str] = "exited"
    code: int
    collectives: Any = None


@dataclass(frozen=True)
class Request(Message):
    """A question from the core: a request kind of `ddptui.rank.asks` and its `args`."""

    KIND: ClassVar[str] = "request"
    id: int
    kind: str
    args: dict[str, Any] = field(default_factory=dict)
    timeout: float = 2.0


@dataclass(frozen=True)
class Reply(Message):
    """The answer to `Request` `id`: `value` when `ok`, else `error` says why."""

    KIND: ClassVar[str] = "reply"
    id: int
    ok: bool
    value: Any = None
    error: str = ""


@dataclass(frozen=True)
class Output(Message):
    """Bytes the rank's terminal printed (a rank ddptui did not spawn relays its own pty).

    `data` is the bytes as latin-1 text: one character per byte, so any byte survives JSON, and
    the ASCII that terminals mostly print costs no more than itself.
    """

    KIND: ClassVar[str] = "output"
    data: str


@dataclass(frozen=True)
class Input(Message):
    """Bytes typed into the rank's terminal, as latin-1 text (core to rank)."""

    KIND: ClassVar[str] = "input"
    data: str


@dataclass(frozen=True)
class Resize(Message):
    """The rank's terminal size (core to rank)."""

    KIND: ClassVar[str] = "resize"
    columns: int
    lines: int


@dataclass(frozen=True)
class StartsRanks(Message):
    """The rank is about to start ranks of its own (`launcher`: `torch.multiprocessing.spawn`)."""

    KIND: ClassVar[str] = "starts_ranks"
    launcher: str


MESSAGES: dict[str, type[Message]] = {
    cls.KIND: cls
    for cls in (
        Hello,
        Welcome,
        Paused,
        Running,
        Crashed,
        Exited,
        Request,
        Reply,
        Output,
        Input,
        Resize,
        StartsRanks,
    )
}

_CHECKS: dict[str, Any] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "dict[str, Any]": lambda v: isinstance(v, dict),
    "Any": lambda v: True,
}


def _decode_field(annotation: str, value: Any) -> Any:
    """Check and convert one field by its annotation."""
    if annotation == "Frame":
        return Frame.from_json(value)
    if annotation == "tuple[Frame, ...]":
        if not isinstance(value, list):
            raise ProtocolError("frames must be a list")
        return tuple(Frame.from_json(item) for item in value)
    if annotation == "Identity":
        if not (isinstance(value, list) and len(value) == 5):
            raise ProtocolError("bad identity")
        checks = ("int", "int", "int", "str", "int")
        if not all(_CHECKS[c](v) for c, v in zip(checks, value, strict=True)):
            raise ProtocolError("bad identity")
        return Identity(*value)
    if not _CHECKS[annotation](value):
        raise ProtocolError(f"expected {annotation}, got {type(value).__name__}")
    return value


_JSON = json.JSONDecoder()


def _paused(body: dict[str, Any]) -> Paused:
    """A `paused` body decoded (every rank sends one a step): the checks of the generic walk, inline."""
    frame = body.get("frame")
    post_mortem = body.get("post_mortem", False)
    depth = body.get("depth", 0)
    why = body.get("why", "")
    if frame is None:
        raise ProtocolError("paused without frame")
    if not isinstance(post_mortem, bool):
        raise ProtocolError(f"expected bool, got {type(post_mortem).__name__}")
    if not isinstance(depth, int) or isinstance(depth, bool):
        raise ProtocolError(f"expected int, got {type(depth).__name__}")
    if not isinstance(why, str):
        raise ProtocolError(f"expected str, got {type(why).__name__}")
    return Paused(Frame.from_json(frame), post_mortem, depth, why)


def decode(line: bytes) -> Message:
    """Decode one JSON line into its message; raise ProtocolError when it is not one."""
    try:
        body = _JSON.decode(line.decode())
    except ValueError:  # UnicodeDecodeError too
        raise ProtocolError("not JSON") from None
    if not isinstance(body, dict):
        raise ProtocolError("not a JSON object")
    kind = body.get("k")
    if kind == "paused":
        return _paused(body)
    cls = MESSAGES.get(kind)  # type: ignore[arg-type]
    if cls is None:
        raise ProtocolError(f"unknown message kind {body.get('k')!r:.40}")
    values = {}
    for name, annotation, required in _fields(cls):
        if name in body:
            values[name] = _decode_field(annotation, body[name])
        elif required:
            raise ProtocolError(f"{cls.KIND} without {name}")
    return cls(**values)
