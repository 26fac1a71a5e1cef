"""Which ranks a line is for: `@0,2-3 p x` targets a subset, `:ranks 0,2-3` sets the default."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

Select = Callable[[str], frozenset[int]]
"""Ranks by mesh coordinates (`tp=0`, `dp=1,tp=0-1`); raises ValueError for what it cannot select."""


class TargetError(ValueError):
    """A rank list that does not parse or names ranks that do not exist."""


def parse_ranks(
    text: str,
    world_size: int,
    groups: Mapping[str, frozenset[int]] | None = None,
    select: Select | None = None,
) -> frozenset[int]:
    """Parse `0,2-3`, `all`, a group's name or mesh coordinates (`tp=0`, with `select`) into a set
    of ranks below `world_size`."""
    text = text.strip()
    if text in ("all", "*"):
        return frozenset(range(world_size))
    if groups and text in groups:
        return groups[text]
    if "=" in text and select is not None:
        return _by_coordinates(text, world_size, select)
    ranks: set[int] = set()
    for part in filter(None, (p.strip() for p in text.split(","))):
        low, sep, high = part.partition("-")
        try:
            first, last = int(low), int(high if sep else low)
        except ValueError:
            raise TargetError(
                f"not a rank list or group: {text!r} (use e.g. 0,2-3, all, tp=0 on a mesh, or :group)"
            ) from None
        if first > last or first < 0 or last >= world_size:
            raise TargetError(f"no such ranks: {part} (ranks are 0-{world_size - 1})")
        ranks.update(range(first, last + 1))
    if not ranks:
        raise TargetError(f"not a rank list: {text!r} (use e.g. 0,2-3 or all)")
    return frozenset(ranks)


def _by_coordinates(text: str, world_size: int, select: Select) -> frozenset[int]:
    """The ranks at the mesh coordinates `text` names; TargetError when none are."""
    try:
        ranks = frozenset(rank for rank in select(text) if rank < world_size)
    except ValueError as exc:
        raise TargetError(str(exc)) from None
    if not ranks:
        raise TargetError(f"no rank at {text}")
    return ranks


def format_ranks(ranks: frozenset[int] | set[int]) -> str:
    """Format ranks compactly: {0, 1, 2, 5} -> `0-2,5`."""
    ordered = sorted(ranks)
    parts: list[str] = []
    start = prev = None
    for rank in [*ordered, None]:
        if rank is not None and prev is not None and rank == prev + 1:
            prev = rank
            continue
        if start is not None:
            parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = rank
    return ",".join(parts)


def name_ranks(ranks: Iterable[int]) -> str:
    """`rank 3` or `ranks 0-2,5` (each rank once, however often it comes)."""
    unique = frozenset(ranks)
    return f"{'rank' if len(unique) == 1 else 'ranks'} {format_ranks(unique)}"


def by_words(said: Iterable[tuple[int, str]]) -> list[tuple[str, str]]:
    """`(rank, words)` pairs as `(ranks named, words)`, one for each distinct text, in order of
    first appearance: 63 ranks waiting at one line make one line, not 63."""
    groups: dict[str, list[int]] = {}
    for rank, words in said:
        groups.setdefault(words, []).append(rank)
    return [(name_ranks(ranks), words) for words, ranks in groups.items()]


@dataclass(frozen=True)
class Line:
    """One line of user input, classified."""

    kind: str
    """`pdb` (a debugger command), `ddptui` (a `:` command) or `empty`."""
    text: str
    """The command without its `@ranks` prefix or `:`."""
    targets: frozenset[int] | None = None
    """Ranks named by an `@` prefix; None means the session's default."""
    force: bool = False
    """`!n`: send an execution command even to ranks that stand at different places."""
    typed: str = field(default="", compare=False)
    """The line as the user typed it (`@1 p x`), for its echo; empty for a key's command (F10).
    Not part of what the line means: `@1  p x` and `@1 p x` are one command."""

    @property
    def echo(self) -> str:
        """What the command log shows of the line: as typed, or the key's command."""
        return self.typed or self.text

    @property
    def executes(self) -> bool:
        """True for a pdb command that resumes the program (`n`, `s`, `c`, `r`, `unt`, `j`, ...)."""
        return self.kind == "pdb" and self.text.split()[0] in EXECUTION_COMMANDS


EXECUTION_COMMANDS = frozenset(
    {"n", "next", "s", "step", "c", "cont", "continue", "r", "return", "unt", "until", "j", "jump"}
)
"""pdb commands that let the program run (the divergence guard holds them back)."""


def parse_line(
    line: str,
    world_size: int,
    groups: Mapping[str, frozenset[int]] | None = None,
    select: Select | None = None,
) -> Line:
    """Classify a line typed into the command line or read from a batch file."""
    stripped = line.strip()
    if not stripped:
        return Line("empty", "")
    if stripped in ("q", "quit", "exit"):  # pdb's own `q` would kill the rank: it means ddptui's quit
        return Line("ddptui", "quit")
    if stripped.startswith(":"):
        return Line("ddptui", stripped[1:].strip())
    targets = None
    if stripped.startswith("@"):
        spec, _, stripped = stripped[1:].partition(" ")
        stripped = stripped.strip()
        if not stripped:
            raise TargetError(f"no command after @{spec}")
        targets = parse_ranks(spec, world_size, groups, select)
    forced = stripped.startswith("!") and stripped[1:].split(" ", 1)[0] in EXECUTION_COMMANDS
    if forced:  # `!n` is ddptui's "send anyway"; other `!statement` lines are pdb's own
        stripped = stripped[1:]
    return Line("pdb", stripped, targets, forced, line.strip())
