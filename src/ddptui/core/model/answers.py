"""What ranks answered, as text lines, and identical answers collapsed (like `dshbak -c`)."""

from __future__ import annotations

from collections.abc import Mapping

from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import terminal_lines


def answer_lines(data: bytes, prompt: bytes, command: str | None = None) -> list[str]:
    """A rank's terminal output as lines, without pdb's echo of `command` and its closing prompt."""
    lines = terminal_lines(data)
    if command is not None and lines and lines[0].strip() == command:
        lines = lines[1:]
    if lines and lines[-1].rstrip() == prompt.decode(errors="replace").rstrip():
        lines = lines[:-1]
    return lines


def collapse(per_rank: Mapping[int, list[str]]) -> list[tuple[frozenset[int], list[str]]]:
    """Ranks that printed exactly the same lines, together; groups in order of their lowest rank."""
    groups: dict[tuple[str, ...], set[int]] = {}
    for rank in sorted(per_rank):
        if per_rank[rank]:
            groups.setdefault(tuple(per_rank[rank]), set()).add(rank)
    return [(frozenset(ranks), list(lines)) for lines, ranks in groups.items()]


def tag(ranks: frozenset[int]) -> str:
    """`[rank 3]` or `[ranks 0-2,5]`."""
    return f"[{name_ranks(ranks)}]"


def tagged(per_rank: Mapping[int, list[str]], collapsed: bool = True) -> list[str]:
    """Every line with its rank tag, identical answers printed once unless `collapsed` is False."""
    if collapsed:
        groups = collapse(per_rank)
    else:
        groups = [(frozenset({rank}), per_rank[rank]) for rank in sorted(per_rank)]
    out: list[str] = []
    for ranks, lines in groups:
        label = tag(ranks)  # once a group, not once a line
        out += [f"{label} {line}" for line in lines]
    return out
