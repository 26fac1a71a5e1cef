"""What `ddptui attach` prints from one look: a state table, the stacks merged, and a verdict.

Without ddptui's rank side there is no collective log: the verdict comes from the stacks alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field

from ddptui.core.attach.look import RankView
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert
from ddptui.rank.paths import is_library, short_path
from ddptui.rank.protocol import Frame


def state_table(views: Sequence[RankView]) -> list[str]:
    """One line per rank: rank, local rank, world size, host, pid, CPU use and state."""
    header = ("rank", "local", "world", "host", "pid", "cpu", "state")
    rows = [header] + [
        (
            str(v.proc.rank),
            _or_dash(v.proc.local_rank),
            _or_dash(v.proc.world_size),
            v.proc.host,
            str(v.proc.pid),
            "-" if v.cpu is None else f"{v.cpu:.0f}%",
            inert(v.describe()),
        )
        for v in views
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]


def _or_dash(value: int | None) -> str:
    """A number, or `-` when unknown."""
    return "-" if value is None else str(value)


def verdict(views: Sequence[RankView], missing: Sequence[int] = ()) -> str:
    """One line from the stacks: ranks grouped by the collective and call site they wait in."""
    if all(v.frames is None for v in views):
        return "no verdict: no rank's stack could be read"
    inside: dict[str, list[int]] = {}
    elsewhere: dict[str, list[int]] = {}
    for v in views:
        point = v.collective()
        if point is not None:
            callee, site = point
            inside.setdefault(f"{callee} ({site})" if site else callee, []).append(v.proc.rank)
        else:
            elsewhere.setdefault(_now(v.describe()), []).append(v.proc.rank)
    if missing:
        elsewhere.setdefault("was not found here", []).extend(missing)
    if not inside:
        return "no hang seen: no rank waits in a collective"
    parts = [
        f"{name_ranks(ranks)} {'waits' if len(ranks) == 1 else 'wait'} in {where}"
        for where, ranks in sorted(inside.items(), key=lambda item: (-len(item[1]), item[1]))
    ]
    parts += [f"{name_ranks(ranks)} {_plural(now, len(ranks))}" for now, ranks in elsewhere.items()]
    kind = "deadlock" if len(inside) > 1 else "hang" if elsewhere else "no hang seen"
    tail = " (one look: look again to see whether they move)" if kind == "no hang seen" else ""
    return inert(f"{kind}: {'; '.join(parts)}{tail}")


def _now(state: str) -> str:
    """A rank's state as the rest of a sentence: `is at train.py:11`, `is running at ...`, `has exited`."""
    if state == "exited":
        return "has exited"
    return "is " + (state.removeprefix("waiting ") if state.startswith("waiting at") else state)


def _plural(phrase: str, count: int) -> str:
    """`is ...` / `has ...` said of several ranks."""
    if count == 1:
        return phrase
    verb, _, rest = phrase.partition(" ")
    return f"{({'is': 'are', 'has': 'have', 'was': 'were'}).get(verb, verb)} {rest}"


@dataclass
class _Node:
    """A frame of the merged tree and the ranks whose stacks pass through it."""

    frame: Frame
    ranks: list[int] = field(default_factory=list)
    children: dict[Frame, _Node] = field(default_factory=dict)


def merged_stacks(views: Sequence[RankView]) -> list[str]:
    """Every rank's main-thread stack in one tree, outermost frame first; ranks part where stacks do."""
    root = _Node(Frame("", 0))
    for v in views:
        frames = list(reversed(v.frames)) if v.frames else [Frame("", 0, f"<{v.describe()}>")]
        node = root
        for frame in frames:
            node = node.children.setdefault(frame, _Node(frame))
            node.ranks.append(v.proc.rank)
    width = max((len(name_ranks(v.proc.rank for v in views)), len("rank 0")))
    lines: list[str] = []
    _render(list(root.children.values()), "", width, lines)
    return lines


def _render(nodes: list[_Node], indent: str, width: int, lines: list[str]) -> None:
    """Lines for sibling subtrees: a run of frames the same ranks share, then the forks below it."""
    for index, node in enumerate(nodes):
        fork, last = len(nodes) > 1, index == len(nodes) - 1
        head = indent + (("└ " if last else "├ ") if fork else "")
        rest = indent + (("  " if last else "│ ") if fork else "")
        chain = [node]
        while len(chain[-1].children) == 1 and next(iter(chain[-1].children.values())).ranks == node.ranks:
            chain.append(next(iter(chain[-1].children.values())))
        for row, text in enumerate(_fold(chain)):
            label = name_ranks(node.ranks) if row == 0 else ""
            lines.append(inert(f"{head if row == 0 else rest}{label.ljust(width)}  {text}"))
        _render(list(chain[-1].children.values()), rest, width, lines)


def _fold(chain: list[_Node]) -> list[str]:
    """A chain's frames as text, runs of 3+ library frames folded (its innermost frame always shown)."""
    texts: list[str] = []
    for is_lib, run in itertools.groupby(chain[:-1], key=lambda node: is_library(node.frame.file)):
        nodes = list(run)
        if is_lib and len(nodes) >= 3:
            texts.append(f"… {len(nodes)} library frames")
        else:
            texts += [_frame_text(node.frame) for node in nodes]
    return [*texts, _frame_text(chain[-1].frame)]


def _frame_text(frame: Frame) -> str:
    """`main (train.py:18)`; a library frame by its package path, as py-spy prints it."""
    if not frame.line:
        return frame.func
    path = frame.file.rpartition("-packages/")[2] if is_library(frame.file) else short_path(frame.file)
    return f"{frame.func} ({path}:{frame.line})"
