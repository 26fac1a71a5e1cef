"""Where the state grid puts each rank's cell when the job has a device mesh: by two of its dims.

Rows go along one dim (the other dims folded into them, in mesh order), columns along another;
a note above the cells names the columns' dim and each column's index (then the key for other
dims: the legend is full), and every row starts with its coordinates (`dp 1`). Ranks outside the
mesh follow; the locations' headings come last, each still picking its ranks when clicked. Plain
data, apart from the widget, like `state_grid_layout`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from ddptui.core.model.topology import Mesh
from ddptui.ui.state_grid_layout import GridLayout, Row

Axes = tuple[str, ...]
"""How the grid is laid out: `(rows dim, columns dim)` (rows `""` for a one-dim mesh), or `()`
for by location."""
BY_LOCATION: Axes = ()
NEXT_KEY = "· m: other dims"
"""Said after the columns' indices: the key that lays the grid out by other dims, then by location."""


@dataclass(frozen=True)
class MeshAxes:
    """A mesh as the grid lays it out: the dim along its rows and the dim along its columns."""

    mesh: Mesh
    rows: str
    """The rows' dim; `""` when the mesh has only the columns' dim."""
    columns: str

    @property
    def axes(self) -> Axes:
        """`(rows, columns)`, as `StateGrid.axes` says it."""
        return (self.rows, self.columns)

    @property
    def row_dims(self) -> tuple[int, ...]:
        """The dims of a row's coordinates: the rows', then the folded ones (of more than one index)."""
        mesh = self.mesh
        folded = [i for i, dim in enumerate(mesh.dims) if dim not in self.axes and mesh.shape[i] > 1]
        return (mesh.dims.index(self.rows), *folded) if self.rows else tuple(folded)

    @property
    def size(self) -> int:
        """How many columns: the size of the columns' dim."""
        return self.mesh.shape[self.mesh.dims.index(self.columns)]

    def label(self, key: tuple[int, ...]) -> str:
        """A row's coordinates, `dp 1` or `pp 0 dp 1`, each index padded to its dim's widest."""
        shape, dims = self.mesh.shape, self.mesh.dims
        return " ".join(
            f"{dims[d]} {i:>{len(str(shape[d] - 1))}}" for d, i in zip(self.row_dims, key, strict=True)
        )

    def indent(self) -> int:
        """Columns before the first cell of a row: the widest label (or the columns' dim), a space."""
        return max(len(self.columns), len(self.label(tuple(0 for _ in self.row_dims)))) + 1

    def fits(self, cell_width: int, room: int) -> bool:
        """Whether a row of every column fits in `room` columns."""
        return self.indent() + self.size * cell_width <= room

    def matrix(self) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Every row: its coordinates and its ranks, one per column, rows in order of coordinates."""
        column = self.mesh.dims.index(self.columns)
        rows: dict[tuple[int, ...], list[int]] = {}
        for rank, at in self.mesh.at.items():
            rows.setdefault(tuple(at[d] for d in self.row_dims), [0] * self.size)[at[column]] = rank
        return [(key, tuple(rows[key])) for key in sorted(rows)]


def choices(mesh: Mesh) -> list[Axes]:
    """Every way to lay a mesh out: each pair of its dims, as rows and columns."""
    if len(mesh.dims) == 1:
        return [("", mesh.dims[0])]
    return list(itertools.permutations(mesh.dims, 2))


def pick(mesh: Mesh | None, axes: Axes | None, count: int, cell_width: int, room: int) -> MeshAxes | None:
    """The mesh dims to lay `count` ranks out by in `room` columns: `axes`, or when None the two
    largest dims (the inner one of two alike), with fewer rows or else in mesh order; None: by
    location (no mesh, `()`, a mesh of ranks the grid does not have, or dims that do not fit)."""
    if mesh is None or axes == BY_LOCATION or any(rank >= count for rank in mesh.at):
        return None
    if axes is not None:
        chosen = MeshAxes(mesh, *axes) if axes in choices(mesh) else None
        return chosen if chosen is not None and chosen.fits(cell_width, room) else None
    largest = sorted(sorted(range(len(mesh.dims)), key=lambda d: (-mesh.shape[d], -d))[:2])
    pairs = (
        choices(mesh)
        if len(largest) < 2
        else [(mesh.dims[a], mesh.dims[b]) for a, b in (largest, largest[::-1])]
    )
    fitting = [MeshAxes(mesh, *pair) for pair in pairs if MeshAxes(mesh, *pair).fits(cell_width, room)]
    return min(fitting, key=lambda chosen: len(mesh.at) // chosen.size, default=None)


def next_axes(mesh: Mesh, now: Axes, cell_width: int, room: int) -> Axes:
    """The layout after `now`: the next pair of dims that fits, by location after the last one."""
    options = [axes for axes in choices(mesh) if MeshAxes(mesh, *axes).fits(cell_width, room)]
    options.append(BY_LOCATION)
    return options[(options.index(now) + 1) % len(options)] if now in options else options[0]


def lay_out(
    keys: Sequence[str], mesh: Mesh | None, axes: Axes | None, cell_width: int, room: int
) -> GridLayout:
    """The grid's rows for ranks at locations `keys` in `room` columns: by the mesh dims `pick`
    chooses, else by location."""
    chosen = pick(mesh, axes, len(keys), cell_width, room)
    if chosen is None:
        return GridLayout.of(keys, max(1, room // cell_width))
    return mesh_layout(keys, chosen, cell_width, room)


def mesh_layout(keys: Sequence[str], chosen: MeshAxes, cell_width: int, room: int) -> GridLayout:
    """The grid's rows for ranks at locations `keys`, laid out by the mesh dims `chosen`."""
    indent = chosen.indent()
    note = f"{chosen.columns:>{indent - 1}} " + "".join(f"{i:>{cell_width}}" for i in range(chosen.size))
    note += f"{NEXT_KEY:>{len(NEXT_KEY) + 3}}"
    rows = [Row("legend"), Row("note", label=note)]
    place: dict[int, tuple[int, int]] = {}
    order: list[int] = []
    for at, ranks in chosen.matrix():
        place.update((rank, (len(rows), column)) for column, rank in enumerate(ranks))
        rows.append(Row("cells", ranks=ranks, label=f"{chosen.label(at):>{indent - 1}} "))
        order += ranks
    outside = [rank for rank in range(len(keys)) if rank not in chosen.mesh.at]
    if outside:
        rows.append(Row("note", label="not in the mesh"))
        per_row = max(1, (room - indent) // cell_width)
        for start in range(0, len(outside), per_row):
            chunk = tuple(outside[start : start + per_row])
            place.update((rank, (len(rows), column)) for column, rank in enumerate(chunk))
            rows.append(Row("cells", ranks=chunk, label=" " * indent))
        order += outside
    groups: dict[str, list[int]] = {}
    for rank, key in enumerate(keys):
        groups.setdefault(key, []).append(rank)
    headings: dict[str, int] = {}
    for key in groups:
        headings[key] = len(rows)
        rows.append(Row("heading", key))
    ranks_at = {key: tuple(ranks) for key, ranks in groups.items()}
    return GridLayout(rows, place, order, headings, ranks_at, indent, chosen.axes)
