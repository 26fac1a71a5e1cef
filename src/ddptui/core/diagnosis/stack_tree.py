"""Merged stacks (`:stacks`): every rank's main-thread stack in one tree, the odd branch marked.

Ranks whose stacks pass through the same frame (file, line, function) at the same depth share a
node; the tree forks where they part. A branch is `odd` when fewer ranks take it than the largest
branch beside it: in a hang that is the rank that went elsewhere. Where a rank's stack ends, the
collective it waits in (its last record, while pending) is named: `#5 all_reduce [3] float32`.

Library frames (torch, the standard library, site-packages) are folded: a run of two or more of
them in a row, taken by the same ranks, becomes one `… N library frames` node. Three kinds of
library frame always stay visible: the innermost one of a stack (the call the rank waits in), one
where ranks part (a fork inside torch says something), and one standing alone (folding one frame
saves nothing). `merge(..., collapse=False)` keeps every frame.

A paused rank's stack is its debugger's (what `where` shows); a running or waiting rank's is a
sample taken now, from its own answer or, when its interpreter cannot answer (a C call holding
the GIL), from a faulthandler dump. A rank that has exited, or cannot be read at all, gets one
placeholder frame saying so (`<exited 0>`, `<no answer: ...>`), so every rank asked is in the tree.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from ddptui.core.diagnosis.collective_records import WORLD, Record, parse_log
from ddptui.core.model.stacks import main_thread, parse_threads
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.core.session.session import Session
from ddptui.core.transport.interface import RequestError
from ddptui.rank import protocol
from ddptui.rank.asks import Collectives, Stack, ThreadStack
from ddptui.rank.paths import is_library
from ddptui.rank.protocol import Frame

STACK_TIMEOUT = 1.0
"""Seconds a rank has to answer `stack` before its stack is read from a faulthandler dump."""
COLLECTIVES_TIMEOUT = 5.0
"""Seconds a rank has to send its last collective (a Flight Recorder dump can take a while)."""
PLACEHOLDER = "<ddptui>"
"""The file of a frame that stands for a stack ddptui could not read (line 0)."""
MAX_FRAMES = 200
"""Frames of one stack kept at most (deep recursion): the outermost `KEEP_OUTER` and the innermost."""
KEEP_OUTER = 20
"""Outermost frames kept of a stack cut to `MAX_FRAMES`; the rest of the room goes to the innermost."""
WIDTH = 120
"""Characters of a rendered line at most."""

_RANK_DIR = os.path.dirname(os.path.abspath(protocol.__file__)) + os.sep


def placeholder(text: str) -> Frame:
    """A frame standing for what is known instead of a stack: `<exited 0>`, `<no answer: ...>`."""
    return Frame(PLACEHOLDER, 0, f"<{inert(text)}>")


def is_placeholder(frame: Frame) -> bool:
    """True for a frame made by `placeholder`."""
    return frame.file == PLACEHOLDER and frame.line == 0


def place(frame: Frame) -> str:
    """`train.py:10`; an installed package's file from the package down: `torch/nn/functional.py:5`.

    A virtualenv inside the working directory would otherwise show every torch frame with its
    whole `.venv/lib/python3.11/site-packages/` prefix.
    """
    for marker in ("/site-packages/", "/dist-packages/"):
        _, found, tail = frame.file.rpartition(marker)
        if found:
            return f"{tail}:{frame.line}"
    return str(frame)


# -- the tree -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stop:
    """Ranks whose stacks end at a node, and the collective they wait in there ("" for none)."""

    ranks: frozenset[int]
    collective: str = ""
    odd: bool = False
    """Fewer ranks stop here than take the largest branch beside it."""

    def label(self, inline: bool) -> str:
        """`#5 all_reduce [3] float32 [ranks 0-2]`, `stops here [rank 0]`; no ranks `inline`."""
        what = self.collective or "stops here"
        return what if inline else f"{what} [{name_ranks(self.ranks)}]"


@dataclass(frozen=True)
class Node:
    """One frame of the merged stacks, the ranks whose stacks pass through it, and what follows.

    The root has no frame; a folded run of library frames has no frame either, but `hidden`.
    """

    frame: Frame | None
    ranks: frozenset[int]
    children: tuple[Node, ...] = ()
    """Deeper frames, largest group of ranks first."""
    stops: tuple[Stop, ...] = ()
    """Ranks whose stack ends here, by the collective they wait in."""
    odd: bool = False
    """Taken by fewer ranks than the largest branch beside it."""
    hidden: tuple[Frame, ...] = ()
    """The library frames this node stands for, outermost first, when folded."""

    @property
    def is_root(self) -> bool:
        """True for the tree's root (it stands for no frame)."""
        return self.frame is None and not self.hidden

    @property
    def inline_stop(self) -> Stop | None:
        """The one stop shown on this node's own line: a leaf where every rank stops alike."""
        if not self.children and len(self.stops) == 1:
            return self.stops[0]
        return None

    def branches(self) -> list[Node | Stop]:
        """What is shown below this node: its children, and its stops unless shown inline."""
        stops: list[Node | Stop] = [] if self.inline_stop else list(self.stops)
        return sorted([*self.children, *stops], key=lambda b: (-len(b.ranks), min(b.ranks)))

    def what(self) -> str:
        """`main (train.py:10)`, `<exited 0>`, `… 3 library frames`, or the root's summary."""
        if self.hidden:
            return f"… {len(self.hidden)} library frames"
        if self.frame is None:
            if not self.ranks:
                return "no ranks"
            count = sum(1 for _ in _stops(self))
            stacks = "one stack" if count == 1 else f"{count} different stacks"
            return f"{name_ranks(self.ranks)}: {stacks}"
        if is_placeholder(self.frame):
            return self.frame.func
        return inert(f"{self.frame.func} ({place(self.frame)})")

    def label(self) -> str:
        """The node's line without tree guides or odd mark: `all_reduce (c10d.py:9) [ranks 0-2] · #5 ...`."""
        if self.is_root:
            return self.what()
        text = f"{self.what()} [{name_ranks(self.ranks)}]"
        stop = self.inline_stop
        return f"{text} · {stop.label(True)}" if stop and stop.collective else text


def _stops(node: Node) -> Iterable[Stop]:
    """Every stop of a tree."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield from current.stops
        pending.extend(current.children)


# -- merging ------------------------------------------------------------------------------------


def annotation(record: Record | None) -> str:
    """`#5 all_reduce [3] float32` (`on group 1` outside the default group); "" when not pending."""
    if record is None or not record.pending:
        return ""
    group = "" if record.pg == WORLD else f" on group {record.pg}"
    return inert(f"#{record.seq}{group} {record.what()}")


def merge(
    stacks: Mapping[int, Sequence[Frame]],
    collectives: Mapping[int, Record | None] | None = None,
    collapse: bool = True,
) -> Node:
    """One tree of every rank's stack (outermost first); `collectives`: each rank's pending collective.

    A record that is not pending is ignored. `collapse` folds runs of library frames.
    """
    notes = {rank: annotation(record) for rank, record in (collectives or {}).items()}
    trimmed = {rank: _trim(list(frames)) for rank, frames in stacks.items()}
    root = _build(None, frozenset(trimmed), 0, trimmed, notes)
    return _collapse(root) if collapse else root


def _trim(frames: list[Frame]) -> list[Frame]:
    """A stack cut to `MAX_FRAMES`: the middle of a deep recursion becomes one placeholder."""
    if len(frames) <= MAX_FRAMES:
        return frames
    inner = MAX_FRAMES - KEEP_OUTER - 1
    left_out = len(frames) - KEEP_OUTER - inner
    return [*frames[:KEEP_OUTER], placeholder(f"… {left_out} frames left out"), *frames[-inner:]]


def _build(
    frame: Frame | None,
    ranks: frozenset[int],
    depth: int,
    stacks: Mapping[int, list[Frame]],
    notes: Mapping[int, str],
) -> Node:
    """The node for `frame` at `depth - 1` taken by `ranks`, with everything below it."""
    groups: dict[Frame, set[int]] = {}
    ending: dict[str, set[int]] = {}
    for rank in sorted(ranks):
        if len(stacks[rank]) > depth:
            groups.setdefault(stacks[rank][depth], set()).add(rank)
        else:
            ending.setdefault(notes.get(rank, ""), set()).add(rank)
    sizes = [len(group) for group in (*groups.values(), *ending.values())]
    largest = max(sizes, default=0)
    children = [
        replace(_build(child, frozenset(group), depth + 1, stacks, notes), odd=len(group) < largest)
        for child, group in groups.items()
    ]
    stops = [Stop(frozenset(group), note, len(group) < largest) for note, group in ending.items()]
    return Node(frame, ranks, tuple(sorted(children, key=_order)), tuple(sorted(stops, key=_order)))


def _order(branch: Node | Stop) -> tuple[int, int]:
    """Largest group of ranks first, then by lowest rank."""
    return (-len(branch.ranks), min(branch.ranks))


def _library(node: Node) -> bool:
    """True for a node of one library frame (placeholders are not library code)."""
    return node.frame is not None and not is_placeholder(node.frame) and is_library(node.frame.file)


def _collapse(node: Node) -> Node:
    """The tree with every run of library frames below `node` folded."""
    return replace(node, children=tuple(_fold(child) for child in node.children))


def _fold(node: Node) -> Node:
    """`node`, or the run of library frames starting at it as one node, then the rest folded too.

    The run stops before the innermost frame of a stack, a fork, and anything not library code.
    """
    run: list[Frame] = []
    current = node
    while _library(current) and len(current.children) == 1 and not current.stops:
        assert current.frame is not None
        run.append(current.frame)
        current = current.children[0]
    if len(run) < 2:
        return _collapse(node)
    return Node(None, node.ranks, (_collapse(current),), odd=node.odd, hidden=tuple(run))


# -- rendering ----------------------------------------------------------------------------------


def render(node: Node, width: int = WIDTH) -> list[str]:
    """The tree as indented lines, `≠` before an odd branch, each cut to `width` characters.

    Indentation grows only where ranks part: a call chain all its ranks share reads down one
    column, outermost first like a traceback, so a deep stack stays within the width.
    """
    lines = [node.label()]
    _render_below(node, "", lines)
    return [line if len(line) <= width else line[: width - 1] + "…" for line in lines]


def _render_below(node: Node, indent: str, lines: list[str]) -> None:
    """Append the lines of everything below `node`."""
    branches = node.branches()
    if len(branches) == 1 and isinstance(branches[0], Node):  # no fork: the chain goes on below
        lines.append(f"{indent}{branches[0].label()}")
        _render_below(branches[0], indent, lines)
        return
    for index, branch in enumerate(branches):
        last = index == len(branches) - 1
        mark = "≠ " if branch.odd else ""
        text = branch.label() if isinstance(branch, Node) else branch.label(False)
        lines.append(f"{indent}{'└─ ' if last else '├─ '}{mark}{text}")
        if isinstance(branch, Node):
            _render_below(branch, indent + ("   " if last else "│  "), lines)


# -- sampling -----------------------------------------------------------------------------------


def chosen(session: Session, targets: Iterable[int] | None = None) -> list[int]:
    """The ranks to show: `targets`, else the session's default targets, else every rank."""
    if targets is None:
        targets = range(len(session.ranks)) if session.targets is None else session.targets
    return sorted(set(targets))


def main_frames(answer: tuple[ThreadStack, ...] | RequestError) -> list[Frame] | str:
    """The main thread's frames of a `stack` answer, outermost first; or why there are none."""
    if isinstance(answer, RequestError):
        return f"no answer: {answer}"
    for thread in answer:
        if thread.main:
            return list(thread.frames) or [placeholder("no frame of the user's code")]
    return "no answer: no main thread"


def dump_frames(dump: str) -> list[Frame]:
    """The main thread's frames of a faulthandler dump, outermost first, without ddptui's launcher."""
    frames = main_thread(parse_threads(dump))[::-1]
    return [frame for frame in frames if not _launcher(frame.file)]


def _launcher(path: str) -> bool:
    """True for runpy and ddptui's rank side: the frames `where` leaves out too."""
    return path.startswith(("<frozen runpy", _RANK_DIR)) or os.path.basename(path) == "runpy.py"


async def sample(session: Session, targets: Iterable[int] | None = None) -> dict[int, list[Frame]]:
    """Every chosen rank's main-thread stack, outermost first (see the module docstring).

    All ranks are asked at once; a rank that does not answer within `STACK_TIMEOUT` is read from
    a faulthandler dump instead, and gets a placeholder when that fails too.
    """
    stacks, _ = await _sample(session, chosen(session, targets))
    return stacks


async def _sample(session: Session, indices: list[int]) -> tuple[dict[int, list[Frame]], list[int]]:
    """`sample`, and the ranks that answered for themselves (their interpreter is responsive)."""
    alive = [i for i in indices if session.ranks[i].state.alive]
    stacks: dict[int, list[Frame] | str] = {
        i: [placeholder(session.ranks[i].state.describe())] for i in indices if i not in alive
    }
    answers = await session.ask(Stack(), alive, STACK_TIMEOUT)
    stacks.update((i, main_frames(answer)) for i, answer in answers.items())
    unread = [i for i, frames in stacks.items() if isinstance(frames, str)]
    dumps = await asyncio.gather(*(session.ranks[i].transport.stack_dump() for i in unread))
    for index, dump in zip(unread, dumps, strict=True):
        stacks[index] = dump_frames(dump) or [placeholder(str(stacks[index]))]
    answered = [i for i in alive if i not in unread]
    return {i: frames for i, frames in sorted(stacks.items()) if not isinstance(frames, str)}, answered


async def pending(session: Session, targets: Iterable[int]) -> dict[int, Record | None]:
    """The collective each rank not at a prompt waits in: its last record, when still pending.

    Ranks at a prompt are not asked: they are not inside a collective, whatever their recorder
    says (it marks a collective done a moment after it returns).
    """
    asked = [i for i in targets if session.ranks[i].state.alive and not session.ranks[i].state.at_prompt]
    answers = await session.ask(Collectives(last=1), asked, COLLECTIVES_TIMEOUT)
    found: dict[int, Record | None] = {}
    for index, answer in answers.items():
        records = [] if isinstance(answer, RequestError) else parse_log(answer)
        found[index] = records[-1] if records and records[-1].pending else None
    return found


async def merged(session: Session, targets: Iterable[int] | None = None, collapse: bool = True) -> Node:
    """The merged tree of the chosen ranks' stacks, each leaf with the collective its ranks wait in.

    Only ranks that answered `stack` themselves are asked for their collective: one that could
    not (a C call holding the GIL) would make everyone wait `COLLECTIVES_TIMEOUT` for nothing.
    """
    stacks, answered = await _sample(session, chosen(session, targets))
    return merge(stacks, await pending(session, answered), collapse)


__all__ = [
    "Node",
    "Stop",
    "annotation",
    "chosen",
    "dump_frames",
    "main_frames",
    "merge",
    "merged",
    "pending",
    "place",
    "placeholder",
    "render",
    "sample",
]
