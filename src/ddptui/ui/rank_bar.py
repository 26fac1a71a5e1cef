"""`RankBar`: every rank's state in colour, what a broadcast still waits for, and divergence."""

from __future__ import annotations

import os
from collections.abc import Callable

from rich.cells import cell_len
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ddptui.core.model.state import Frame, Phase, RankState, describe_exit
from ddptui.core.model.targets import format_ranks, name_ranks
from ddptui.core.model.text import inert
from ddptui.core.model.topology import Mesh
from ddptui.ui.mesh_slice import slice_words

PHASE_STYLES = {
    Phase.STARTING: "dim",
    Phase.RUNNING: "bold blue",
    Phase.PAUSED: "bold green",
    Phase.WAITING: "bold yellow",
    Phase.EXITED: "dim",
    Phase.CRASHED: "bold red",
}

LEVELS = (0, 1, 2)
"""How much a narrow bar leaves out: 0 nothing, 1 directories and messages, 2 file names too."""
DETAIL = ((0, True), (1, True), (2, True), (2, False))
"""The chips' words in the order a narrowing bar tries them: a level, and whether ranks' mesh
coordinates are said (they go last: they are what tells the ranks of a mesh apart)."""


def style_of(state: RankState) -> str:
    """The colour of a state: failures red whatever their phase."""
    if state.crash is not None or (state.phase is Phase.EXITED and state.exit_code):
        return "bold red"
    return PHASE_STYLES[state.phase]


def has_crashed(state: RankState) -> bool:
    """True once a rank raised, or died of a fatal signal."""
    return state.crash is not None or state.phase is Phase.CRASHED


def group(states: tuple[RankState, ...], key: Callable[[RankState], str | None]) -> dict[str, set[int]]:
    """Ranks by `key` of their state (None: left out), in order of their lowest rank."""
    groups: dict[str, set[int]] = {}
    for index, state in enumerate(states):
        name = key(state)
        if name is not None:
            groups.setdefault(name, set()).add(index)
    return groups


def place(frame: Frame, level: int) -> str:
    """`train.py:28` as shown at a level: the short path, the file name, or the line alone."""
    if level == 0:
        return str(frame)
    return f"{os.path.basename(frame.file)}:{frame.line}" if level == 1 else f"line {frame.line}"


def brief(state: RankState, level: int) -> str:
    """The state in words, fewer at each level; level 0 is `RankState.describe()`."""
    if level == 0:
        return inert(state.describe())
    if state.crash is not None:
        where = state.crash.where
        return inert(
            f"crashed {state.crash.type}" + (f" ({place(where, 1)})" if where and level == 1 else "")
        )
    if state.phase is Phase.PAUSED and state.location:
        return inert(f"paused at {place(state.location, level)}")
    if state.phase is Phase.WAITING:
        return inert("waiting" + (f" in {state.waiting_in}" if state.waiting_in else ""))
    if state.exit_code is not None:
        return describe_exit(state.exit_code)
    return str(state.phase.value)


def paused_at(state: RankState) -> Frame | None:
    """Where a rank is paused (not in post-mortem), or None."""
    if state.phase is Phase.PAUSED and state.location is not None and state.crash is None:
        return state.location
    return None


def paused_line(state: RankState) -> str | None:
    """`paused_at` in words, to group ranks by."""
    where = paused_at(state)
    return None if where is None else str(where)


def chip(ranks: set[int], state: RankState, level: int = 0, where: str = "") -> Text:
    """One entry: `r0-3 paused at train.py:28`, coloured by phase; `where`: the ranks' place in
    the mesh (`r3 dp1 tp1`)."""
    style = style_of(state)
    who = f"r{format_ranks(ranks)} {where}" if where else f"r{format_ranks(ranks)}"
    return Text.assemble((f" {who} ", "reverse " + style), (f" {brief(state, level)} ", style))


def divergence(states: tuple[RankState, ...], level: int = 0) -> str:
    """Say where paused ranks stand when they are not all at the same line; empty otherwise."""
    groups = group(states, paused_line)
    if len(groups) < 2:
        return ""
    stands = [(ranks, paused_at(states[min(ranks)])) for ranks in groups.values()]
    parts = [f"{format_ranks(ranks)} at {place(where, level)}" for ranks, where in stands if where]
    return inert("ranks diverge: " + " · ".join(parts))


def layout(entries: list[Text], width: int) -> list[Text]:
    """Entries on lines of `width` cells, two spaces apart, broken only between entries."""
    lines: list[Text] = []
    for entry in entries:
        if lines and lines[-1].cell_len + 2 + entry.cell_len <= width:
            lines[-1].append("  ")
            lines[-1].append_text(entry)
        else:
            lines.append(entry.copy())
    return lines


class RankBar(Widget):
    """A live summary of all ranks, above the panes; it says less rather than hide a line."""

    states: reactive[tuple[RankState, ...]] = reactive(tuple)
    """The state of each rank, indexed by rank."""
    outstanding: reactive[frozenset[int]] = reactive(frozenset)
    """Ranks the broadcast in flight still waits for."""
    in_flight: reactive[str] = reactive("")
    """The command being broadcast, or empty."""
    mesh: reactive[Mesh | None] = reactive(None)
    """The job's device mesh once known: each chip says its ranks' coordinates where they fit."""

    @property
    def crashed(self) -> list[int]:
        """The ranks that have crashed, lowest first."""
        return [index for index, state in enumerate(self.states) if has_crashed(state)]

    def render(self) -> Text:
        """Chips for every rank, then a line about the broadcast in flight and divergence."""
        width, height = self.size
        notes = self._notes(width)
        return Text("\n").join([*self._chip_lines(width, max(1, height - len(notes))), *notes])

    def _chip_lines(self, width: int, rows: int) -> list[Text]:
        """The chips on the fewest lines, then in the most words, that fit; cut at `rows` lines."""
        groups = list(group(self.states, RankState.describe).values())
        detail = DETAIL if self.mesh is not None else [(level, False) for level in LEVELS]
        layouts = [layout([self._chip(ranks, *words) for ranks in groups], width) for words in detail]
        for used in range(1, rows + 1):
            for lines in layouts:
                if len(lines) <= used:
                    return lines
        # Too many for the bar: the last line runs on and the styles end it with an ellipsis.
        lines = layouts[-1]
        return [*lines[: rows - 1], Text("  ").join(lines[rows - 1 :])]

    def _chip(self, ranks: set[int], level: int, coordinates: bool) -> Text:
        """A group's chip, marked when the broadcast in flight still waits for one of its ranks."""
        where = slice_words(self.mesh, ranks) if coordinates else ""
        entry = chip(ranks, self.states[min(ranks)], level, where)
        if ranks & self.outstanding:
            entry.append("⧗", "bold yellow")
        return entry

    def _notes(self, width: int) -> list[Text]:
        """The broadcast in flight, then divergence in as many words as fit in `width`."""
        notes = []
        if self.in_flight:
            waiting = f" on {name_ranks(self.outstanding)}" if self.outstanding else ""
            notes.append(Text(f"⧗ {self.in_flight!r} out{waiting}", "yellow"))
        warnings = [divergence(self.states, level) for level in LEVELS]
        if warnings[0]:
            fitting = [text for text in warnings if cell_len(text) + 2 <= width]
            notes.append(Text(f"⚠ {(fitting or warnings[-1:])[0]}", "bold magenta"))
        return notes

    def watch_states(self, states: tuple[RankState, ...]) -> None:
        """Flag the bar when ranks diverge, so styles can draw attention to it."""
        self.set_class(bool(divergence(states)), "-diverged")
