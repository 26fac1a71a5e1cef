"""`RankBar`: every rank's state in colour, what a broadcast still waits for, and divergence."""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ddptui.core.state import Phase, RankState
from ddptui.core.targets import format_ranks
from ddptui.core.text import inert

PHASE_STYLES = {
    Phase.STARTING: "dim",
    Phase.RUNNING: "bold blue",
    Phase.PAUSED: "bold green",
    Phase.WAITING: "bold yellow",
    Phase.EXITED: "dim",
    Phase.CRASHED: "bold red",
}


def style_of(state: RankState) -> str:
    """The colour of a state: failures red whatever their phase."""
    if state.crash is not None or (state.phase is Phase.EXITED and state.exit_code):
        return "bold red"
    return PHASE_STYLES[state.phase]


def group(states: tuple[RankState, ...], key: Callable[[RankState], str | None]) -> dict[str, set[int]]:
    """Ranks by `key` of their state (None: left out), in order of their lowest rank."""
    groups: dict[str, set[int]] = {}
    for index, state in enumerate(states):
        name = key(state)
        if name is not None:
            groups.setdefault(name, set()).add(index)
    return groups


def paused_line(state: RankState) -> str | None:
    """Where a rank is paused (not in post-mortem), or None."""
    if state.phase is Phase.PAUSED and state.location is not None and state.crash is None:
        return str(state.location)
    return None


def chip(ranks: set[int], state: RankState) -> Text:
    """One entry: `r0-3 paused at train.py:28`, coloured by phase."""
    style = style_of(state)
    text = inert(state.describe())
    return Text.assemble((f" r{format_ranks(ranks)} ", "reverse " + style), (f" {text} ", style))


def divergence(states: tuple[RankState, ...]) -> str:
    """Say where paused ranks stand when they are not all at the same line; empty otherwise."""
    groups = group(states, paused_line)
    if len(groups) < 2:
        return ""
    parts = [f"{format_ranks(ranks)} at {where}" for where, ranks in groups.items()]
    return inert("ranks diverge: " + " · ".join(parts))


class RankBar(Widget):
    """A live summary of all ranks, above the panes."""

    states: reactive[tuple[RankState, ...]] = reactive(tuple)
    """The state of each rank, indexed by rank."""
    outstanding: reactive[frozenset[int]] = reactive(frozenset)
    """Ranks the broadcast in flight still waits for."""
    in_flight: reactive[str] = reactive("")
    """The command being broadcast, or empty."""

    def render(self) -> Text:
        """Chips for every rank, then a line about the broadcast in flight and divergence."""
        text = Text()
        for ranks in group(self.states, RankState.describe).values():
            entry = chip(ranks, self.states[min(ranks)])
            if ranks & self.outstanding:
                entry.append("⧗", "bold yellow")
            text.append_text(entry)
            text.append("  ")
        notes = []
        if self.in_flight:
            waiting = format_ranks(self.outstanding) if self.outstanding else "-"
            notes.append(Text(f"⧗ {self.in_flight!r} out on ranks {waiting}", "yellow"))
        if warning := divergence(self.states):
            notes.append(Text(f"⚠ {warning}", "bold magenta"))
        for note in notes:
            text.append("\n")
            text.append_text(note)
        return text

    def watch_states(self, states: tuple[RankState, ...]) -> None:
        """Flag the bar when ranks diverge, so styles can draw attention to it."""
        self.set_class(bool(divergence(states)), "-diverged")
