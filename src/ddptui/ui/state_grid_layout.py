"""Where the state grid puts each rank's cell: rows of cells under a heading per location.

Plain data, apart from the widget: `StateGrid` lays its ranks out again (`GridLayout.of`) only
when a rank moves to another location or the width changes, and asks the layout which rank is in
which cell, which ranks a heading counts, and where the cursor goes next. With a device mesh the
cells are laid out by its dims instead (`state_grid_mesh`), into the same `GridLayout`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ddptui.core.model.state import RankState, describe_exit


def location(state: RankState) -> str:
    """The group of a rank's cell: where it stands (also while it runs on from there), or its end.

    A rank keeps its place while it runs, so stepping recolours cells and moves them only when
    they reach another line.
    """
    if state.exit_code is not None and state.crash is None:
        return describe_exit(state.exit_code)
    if state.location is not None:
        return str(state.location)
    return state.phase.value


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the grid: the legend, a group's heading, up to a row's width of cells, or a
    note (a mesh's axis)."""

    kind: Literal["legend", "heading", "cells", "note"]
    group: str = ""
    ranks: tuple[int, ...] = ()
    label: str = ""
    """A note's text; for cells, what comes before them (a mesh row's coordinates)."""


@dataclass(frozen=True)
class GridLayout:
    """The grid's rows for one width, and where each rank's cell is in them (empty: not laid out)."""

    rows: list[Row] = field(default_factory=list)
    place: dict[int, tuple[int, int]] = field(default_factory=dict)
    """Each rank's row and column in the current layout."""
    order: list[int] = field(default_factory=list)
    """Ranks in the order their cells are drawn (for left/right)."""
    headings: dict[str, int] = field(default_factory=dict)
    """The row of each location's heading."""
    groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """The ranks at each location, lowest first."""
    indent: int = 0
    """Columns of every cells row before its first cell (a mesh row's label)."""
    axes: tuple[str, ...] = ()
    """The mesh dims along the rows and the columns; empty: laid out by location."""

    @classmethod
    def of(cls, keys: Sequence[str], per_row: int) -> GridLayout:
        """Rows for every location, in the order of each location's lowest rank."""
        groups: dict[str, list[int]] = {}
        for rank, key in enumerate(keys):
            groups.setdefault(key, []).append(rank)
        rows = [Row("legend")]
        place: dict[int, tuple[int, int]] = {}
        headings: dict[str, int] = {}
        order: list[int] = []
        for key, ranks in groups.items():
            headings[key] = len(rows)
            rows.append(Row("heading", key))
            for start in range(0, len(ranks), per_row):
                chunk = tuple(ranks[start : start + per_row])
                place.update((rank, (len(rows), column)) for column, rank in enumerate(chunk))
                rows.append(Row("cells", key, chunk))
            order += ranks
        return cls(rows, place, order, headings, {key: tuple(ranks) for key, ranks in groups.items()})

    def rank_at(self, x: int, row: int, cell_width: int) -> int | None:
        """The rank whose cell is drawn at column `x` of row `row`, or None."""
        if not 0 <= row < len(self.rows) or self.rows[row].kind != "cells" or x < self.indent:
            return None
        ranks, column = self.rows[row].ranks, (x - self.indent) // cell_width
        return ranks[column] if column < len(ranks) else None

    def start(self, rank: int, cell_width: int) -> tuple[int, int] | None:
        """The column and row where a rank's cell is drawn, or None when it is not laid out."""
        place = self.place.get(rank)
        return None if place is None else (self.indent + place[1] * cell_width, place[0])

    def ranks_of(self, group: str) -> Iterable[int]:
        """The ranks a heading counts."""
        return self.groups.get(group, ())

    def moved(self, rank: int, across: int, down: int) -> int | None:
        """The rank `across` cells from `rank` in drawing order, or `down` rows of cells below it
        (above when negative), in the nearest column; None when there is none to move to.
        """
        if rank not in self.place:
            return None
        if across:
            index = self.order.index(rank) + across
            return self.order[min(max(index, 0), len(self.order) - 1)]
        row, column = self.place[rank]
        step = 1 if down > 0 else -1
        row += step
        while 0 <= row < len(self.rows):
            ranks = self.rows[row].ranks
            if ranks:
                return ranks[min(column, len(ranks) - 1)]
            row += step
        return None
