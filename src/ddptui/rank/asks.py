"""Every request the core can send a rank, declared once: its arguments and its reply's type.

Imported by both sides; standard library only. A request kind is a frozen dataclass deriving from
`Ask[R]`, `R` the type of its reply: the core builds one (`Eval("x")`) and gets an `R` back
(`RankTransport.request`, `Session.ask`); the rank's handler table (`ddptui.rank.requests`) pairs
each kind with a function that takes it and returns an `R` (`Eval.answered_by(evaluate)`). mypy
holds both sides to the declaration, and at run time the same annotations check a request as it
is built (an unknown field or a value of the wrong type raises there), the rank refuses arguments
a kind does not take, and the core refuses a reply of another shape.

The wire is what it was (`ddptui.rank.protocol.Request` and `Reply`): a request's `args` are its
fields that differ from their defaults, plus `do` for the kinds that share the wire kind
`until_collective`; dataclasses travel as JSON objects, tuples as lists, frames as
`[file, line, func]` (`ddptui.rank.typed_json`). Kept apart from `protocol.py`, the messages,
which is at its size limit.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Self, TypeVar

from ddptui.rank import typed_json
from ddptui.rank.protocol import Frame

R = TypeVar("R")

ACTION_ARG = "do"
"""The argument that tells apart the kinds sharing one wire kind."""

Handler = tuple[type["Ask[Any]"], Callable[[Any], Any]]
"""A kind and the rank's function that answers it (made by `Ask.answered_by`, which checks them)."""


@dataclass(frozen=True)
class Ask(Generic[R]):
    """A request the core sends a rank; `R` is the type of the rank's reply."""

    KIND: ClassVar[str] = ""
    """The request's kind on the wire."""
    ACTION: ClassVar[str] = ""
    """Its `do` argument, for a kind that shares its wire kind with others."""

    def __post_init__(self) -> None:
        """Check every field against its annotation (taking the lists JSON gives for tuples)."""
        for name, shape, _ in typed_json.annotated_fields(type(self)):
            value = getattr(self, name)
            read = typed_json.read(shape, value, f"{self.KIND}.{name}")
            if read is not value:
                object.__setattr__(self, name, read)

    def args(self) -> dict[str, Any]:
        """The request's `args` on the wire: its fields that differ from their defaults."""
        args: dict[str, Any] = {ACTION_ARG: self.ACTION} if self.ACTION else {}
        for name, _, default in typed_json.annotated_fields(type(self)):
            value = getattr(self, name)
            if value != default:
                args[name] = typed_json.write(value)
        return args

    @classmethod
    def from_args(cls, args: dict[str, Any]) -> Self:
        """The request that `args` from the wire stand for; ProtocolError for an argument it does not take."""
        fields = {name: value for name, value in args.items() if not (cls.ACTION and name == ACTION_ARG)}
        return typing.cast(Self, typed_json.read_object(cls, fields, cls.KIND))

    def read_reply(self, value: Any) -> R:
        """A reply's value from the wire as its declared type; ProtocolError when it is not one."""
        return typing.cast(R, typed_json.read(reply_type(type(self)), value, f"{self.KIND} reply"))

    def write_reply(self, value: R) -> Any:
        """A reply's value in its wire form (a plain JSON value is sent as it is, not walked)."""
        return value if typed_json.plain(reply_type(type(self))) else typed_json.write(value)

    @classmethod
    def answered_by(cls, run: Callable[[Self], R]) -> Handler:
        """This kind paired with `run`, its handler: mypy checks that `run` takes this kind and
        returns its reply's type."""
        return cls, run


def reply_type(kind: type[Ask[Any]]) -> Any:
    """The `R` of `class KIND(Ask[R])`."""
    for base in kind.__dict__.get("__orig_bases__", ()):
        if typing.get_origin(base) is Ask:
            return typing.get_args(base)[0]
    raise TypeError(f"{kind.__name__} does not say its reply's type: declare it as Ask[REPLY]")


# -- the kinds -------------------------------------------------------------------------------------

Summary = dict[str, Any]
"""A value as `ddptui.rank.summary` describes it: `type`, `repr`, `key`, a tensor's statistics..."""
CollectiveRecord = dict[str, Any]
"""One collective as `ddptui.rank.collectives.collective_log` records it (or `{"error": ...}`)."""


@dataclass(frozen=True)
class ThreadStack:
    """One thread's Python stack, outermost frame first; `ddptui`: one of ddptui's own threads."""

    name: str
    main: bool
    ddptui: bool
    frames: tuple[Frame, ...]


@dataclass(frozen=True)
class StoreAddress:
    """The rendezvous store a rank's main thread is creating, and whether the rank is its client."""

    host: str
    port: int
    client: bool


@dataclass(frozen=True)
class Skipping:
    """The sites whose breakpoints stop no more (`all`: no hard-coded one stops), and the
    breakpoint (file, line) this rank last stopped at, if it stopped at one."""

    here: tuple[str, int] | None
    sites: tuple[tuple[str, int], ...]
    all: bool


@dataclass(frozen=True)
class Armed:
    """A stop before the next collective is armed; `hooked` is False until torch loads."""

    armed: bool
    hooked: bool


@dataclass(frozen=True)
class Editing:
    """Whether readline has the rank's terminal now."""

    editing: bool


@dataclass(frozen=True)
class Eval(Ask[Summary]):
    """An expression, in the current frame or in stack frame `frame` (as `where` numbers it);
    with `truth`, its truth as the rank's own `bool(value)` says it (a summary of True or False).

    An evaluation that reaches the request's timeout is stopped where it can be (an error reply
    beginning `STOPPED`); one that cannot be is said to be still running (`STILL_RUNNING`), and
    the rank evaluates nothing else until it ends (`ddptui.rank.evaluation`).
    """

    KIND: ClassVar[str] = "eval"
    STOPPED: ClassVar[str] = "stopped"
    STILL_RUNNING: ClassVar[str] = "still running"
    expr: str
    frame: int | None = None
    truth: bool = False
    peers: tuple[int, ...] = ()
    """The ranks asked to evaluate it together: a collective it issues whose group holds another
    rank raises instead of waiting for it (`ddptui.rank.eval_guard`); empty: not known."""


@dataclass(frozen=True)
class Stack(Ask[tuple[ThreadStack, ...]]):
    """Every thread's Python stack (a main thread at a prompt: the debugger's stack)."""

    KIND: ClassVar[str] = "stack"


@dataclass(frozen=True)
class Store(Ask[StoreAddress | None]):
    """The rendezvous store the main thread is creating; None when it is elsewhere."""

    KIND: ClassVar[str] = "store"


@dataclass(frozen=True)
class Collectives(Ask[list[CollectiveRecord]]):
    """The rank's record of collectives, oldest first (the `last` ones only)."""

    KIND: ClassVar[str] = "collectives"
    last: int | None = None


@dataclass(frozen=True)
class SaveCollectives(Ask[bool]):
    """Leave the Flight Recorder's dump in the session directory; True when it was written."""

    KIND: ClassVar[str] = "save_collectives"


@dataclass(frozen=True)
class Skip(Ask[Skipping]):
    """Skip the breakpoints at `sites`, hard-coded or pdb's (`all`: skip every hard-coded one, or
    none; `none`: forget every skip). A site's file is absolute or as typed (`train.py`)."""

    KIND: ClassVar[str] = "skip"
    sites: tuple[tuple[str, int], ...] = ()
    all: bool | None = None
    none: bool = False


@dataclass(frozen=True)
class Breakpoint:
    """One of pdb's breakpoints in a rank (`b`, `--break`), as pdb numbers and counts it."""

    number: int
    file: str
    line: int
    condition: str | None
    enabled: bool
    temporary: bool
    hits: int


@dataclass(frozen=True)
class Breaks(Ask[list[Breakpoint]]):
    """The rank's pdb breakpoints, in pdb's order (`ddptui.rank.breaks`)."""

    KIND: ClassVar[str] = "breaks"


@dataclass(frozen=True)
class Interrupt(Ask[bool]):
    """Stop the main thread at the line it runs, as Ctrl-C would; False while a prompt stays open."""

    KIND: ClassVar[str] = "interrupt"


@dataclass(frozen=True)
class Edit(Ask[Editing]):
    """A person types at the rank's prompt: read it through readline."""

    KIND: ClassVar[str] = "edit"


@dataclass(frozen=True)
class Ddp(Ask[list[dict[str, Any]]]):
    """The rank's DistributedDataParallel modules, their tensors summarised (`ddptui.rank.ddp`)."""

    KIND: ClassVar[str] = "ddp"


@dataclass(frozen=True)
class Replicas(Ask[list[dict[str, Any]]]):
    """The rank's modules with DTensor parameters (FSDP2, tensor parallel), their parameters and
    gradients summarised with their layouts (`ddptui.rank.replicas`)."""

    KIND: ClassVar[str] = "replicas"


@dataclass(frozen=True)
class Timeouts(Ask[dict[str, float]]):
    """Process groups whose timeout ddptui raised: name -> the seconds they would have had."""

    KIND: ClassVar[str] = "timeouts"


@dataclass(frozen=True)
class Topology(Ask[dict[str, Any]]):
    """The process groups this rank is in and the device meshes it knows (`ddptui.rank.topology`)."""

    KIND: ClassVar[str] = "topology"


@dataclass(frozen=True)
class Progress(Ask[int]):
    """How far the rank's collectives have got: grows as they are issued and complete
    (`ddptui.rank.progress`)."""

    KIND: ClassVar[str] = "progress"


UNTIL = "until_collective"
"""The wire kind of the stop before the next collective (`ddptui.rank.until`): one per `do`."""


@dataclass(frozen=True)
class UntilArm(Ask[Armed]):
    """Stop before the next collective the main thread enters."""

    KIND: ClassVar[str] = UNTIL
    ACTION: ClassVar[str] = "arm"


@dataclass(frozen=True)
class UntilDisarm(Ask[None]):
    """Forget the stop before the next collective."""

    KIND: ClassVar[str] = UNTIL
    ACTION: ClassVar[str] = "disarm"


@dataclass(frozen=True)
class UntilPending(Ask[CollectiveRecord | None]):
    """The collective the stopped main thread is about to enter, with its `seq` (and disarm)."""

    KIND: ClassVar[str] = UNTIL
    ACTION: ClassVar[str] = "pending"


@dataclass(frozen=True)
class UntilHold(Ask[bool]):
    """Keep the rank from entering the collective it stopped before (`why`); False if it is not there."""

    KIND: ClassVar[str] = UNTIL
    ACTION: ClassVar[str] = "hold"
    why: str = ""


@dataclass(frozen=True)
class UntilRelease(Ask[bool]):
    """Let a held rank enter its collective."""

    KIND: ClassVar[str] = UNTIL
    ACTION: ClassVar[str] = "release"


def _table(*kinds: type[Ask[Any]]) -> dict[tuple[str, str], type[Ask[Any]]]:
    """The kinds by (wire kind, action); an empty or twice-declared kind, or one that does not say
    its reply's type, fails here, as the module loads."""
    table: dict[tuple[str, str], type[Ask[Any]]] = {}
    for kind in kinds:
        key = (kind.KIND, kind.ACTION)
        if not kind.KIND or key in table:
            raise TypeError(f"{kind.__name__}: request kind {key} is empty or declared twice")
        reply_type(kind)
        table[key] = kind
    return table


KINDS = _table(
    Eval, Stack, Store, Collectives, SaveCollectives, Skip, Breaks, Interrupt, Edit, Ddp, Replicas,
    Timeouts, Topology, Progress,
    UntilArm, UntilDisarm, UntilPending, UntilHold, UntilRelease,
)  # fmt: skip
"""Every request kind, by its kind and action on the wire."""


def kind_of(kind: str, args: dict[str, Any]) -> type[Ask[Any]] | None:
    """The declared kind of a request from the wire; None for a kind no one declared."""
    action = args.get(ACTION_ARG, "")
    return KINDS.get((kind, action if isinstance(action, str) else ""))
