"""What the state grid's cells and headings look like: a rank's colour and mark, a group's label.

Plain functions of the states, apart from the widget, and the styles they are drawn in
(`CellStyles`, read from `StateGridView`'s component classes and cached until the theme changes).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

from ddptui.core.model.state import Phase, RankState
from ddptui.core.model.text import inert

ROOT_MARK = "!"
"""The mark of the rank whose failure explains the others."""
MISSING_MARK = "?"
"""The mark of a rank the others wait for in a collective it never entered."""
LEGEND_PHASES = (Phase.PAUSED, Phase.RUNNING, Phase.WAITING, Phase.EXITED, Phase.CRASHED)


def look(state: RankState) -> Phase:
    """The phase a cell is coloured as: a failure is `crashed` whatever phase it happened in."""
    if state.crash is not None or state.phase is Phase.CRASHED:
        return Phase.CRASHED
    if not state.alive:
        return Phase.CRASHED if state.exit_code and not state.ended_by_ddptui else Phase.EXITED
    return state.phase


def heading(where: str, phases: Iterable[Phase], mesh_slice: str = "") -> str:
    """`train.py:28 · 60 paused, 4 waiting`, or `exited 0 · 64 ranks`: a group's plain-text label,
    ending with the slice of the mesh its ranks are (`· tp 1`) when there is one."""
    counts = Counter(phases)
    end = f" · {mesh_slice}" if mesh_slice else ""
    if len(counts) == 1 and where.startswith(next(iter(counts)).value):
        count = counts.total()
        return inert(f"{where} · {count} rank{'s' if count > 1 else ''}{end}")
    parts = [f"{counts[phase]} {phase.value}" for phase in (Phase.STARTING, *LEGEND_PHASES) if counts[phase]]
    return inert(f"{where} · {', '.join(parts)}{end}")


def cells(
    ranks: Iterable[int], marks: Mapping[int, str], digits: int, style: Callable[[int], Style]
) -> Strip:
    """A row of cells, a mark and the rank number each (one segment per run of cells that look alike)."""
    segments: list[Segment] = []
    for rank in ranks:
        cell_style = style(rank)
        text = f"{marks.get(rank, ' ')}{rank:>{digits}}"
        if segments and segments[-1].style is cell_style:
            segments[-1] = Segment(segments[-1].text + text, cell_style)
        else:
            segments.append(Segment(text, cell_style))
    return Strip(segments)


def legend(label: Style, colour: Callable[[Phase], Style]) -> Strip:
    """What the colours and marks mean, and the keys."""
    segments = []
    for phase in LEGEND_PHASES:
        segments += [Segment(f" {phase.value} ", colour(phase)), Segment(" ", label)]
    keys = f" {ROOT_MARK} root cause  {MISSING_MARK} missing from a collective · space/g pick, enter show"
    return Strip([*segments, Segment(keys, label)])


class CellStyles:
    """The rich styles a grid draws with, from its `state-grid--*` component classes."""

    def __init__(self, grid: Widget) -> None:
        """Styles read from `grid`, each once until `clear`."""
        self._grid = grid
        self._styles: dict[tuple[Phase, bool, bool, bool], Style] = {}
        self._plain: Style | None = None

    def clear(self) -> None:
        """Drop the cached styles: the theme or the CSS changed."""
        self._styles.clear()
        self._plain = None

    def cell(self, phase: Phase, shown: bool = False, selected: bool = False, cursor: bool = False) -> Style:
        """The style of a cell that looks like this, cached until the styles change."""
        key = (phase, shown, selected, cursor)
        style = self._styles.get(key)
        if style is None:
            style = self._grid.get_component_rich_style(f"state-grid--{phase.value}")
            for name, wanted in (("shown", shown), ("selected", selected), ("cursor", cursor)):
                if wanted:
                    style += self._grid.get_component_rich_style(f"state-grid--{name}", partial=True)
            self._styles[key] = style
        return style

    def base(self) -> Style:
        """The widget's own style, for blank cells (cached: computing it walks up the DOM)."""
        if self._plain is None:
            self._plain = self._grid.rich_style
        return self._plain

    def heading(self) -> Style:
        """The style of headings and the legend."""
        return self._grid.get_component_rich_style("state-grid--heading")
