"""What must agree across ranks for one DTensor: its local shards along the mesh dims it is
replicated on. Shards differ by design and partial sums are not comparable; replicas must be equal.

Pure logic over the `dtensor` entry of each rank's tensor summary (`ddptui.rank.tensor_summary`):
`mesh` (dim name -> size), `placements` (a repr per mesh dim), `kinds` (`replicate`, `partial`,
`shard` or `other` per mesh dim), `global_shape`, `coordinate` (this rank's index along each mesh
dim) and `mesh_id` (which ranks the mesh spans). Ranks of one mesh whose coordinates differ only
along replicated dims form a *replica group*; within one, every local shard must be equal. Ranks of
two meshes of one shape (`mesh["tp"]` in dp replica 0 and in dp replica 1) are never grouped: what
ties them (DDP? pipeline stages?) the DTensor does not say. `:compare` and the replica check of
`:ddp-check` both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ddptui.core.model.targets import name_ranks

Same = Callable[[int, int], bool]
"""Whether two ranks' local values count as equal (equal keys, or within a tolerance)."""
ODD_NOTES = 4
"""Ranks that differ from their replicas named one line each, at most; the rest are counted."""
REPLICATE = "replicate"
"""The kind of a mesh dim along which every rank holds the same local shard."""
DESIGN = {
    "shard": "shards differ along {along} by design ({placements})",
    "partial": "partial sums along {along} are not comparable ({placements})",
    "other": "along {along} not compared ({placements})",
}
"""What the verdict says of mesh dims whose ranks need not agree, by placement kind."""


@dataclass(frozen=True)
class Layout:
    """How one DTensor lies on its mesh: global shape, mesh dim names and sizes, a placement and
    its kind per mesh dim."""

    global_shape: tuple[int, ...]
    names: tuple[str, ...]
    sizes: tuple[int, ...]
    placements: tuple[str, ...]
    kinds: tuple[str, ...]

    def dims(self, kind: str) -> list[int]:
        """The mesh dims whose placement is of `kind`."""
        return [dim for dim, placed in enumerate(self.kinds) if placed == kind]

    def along(self, dims: Sequence[int]) -> str:
        """`dp, tp`: the names of mesh dims."""
        return ", ".join(self.names[dim] for dim in dims)

    def describe(self) -> str:
        """`(Shard(dim=0), Replicate()) on mesh dp=2 tp=2`."""
        mesh = " ".join(f"{name}={size}" for name, size in zip(self.names, self.sizes, strict=True))
        return f"({', '.join(self.placements)}) on mesh {mesh}"


def layout_of(dtensor: Any) -> tuple[Layout, tuple[int, ...]] | None:
    """A rank's DTensor layout and its coordinate; None when the entry lacks one (a rank outside
    the mesh has no coordinate) or its parts do not match up."""
    if not isinstance(dtensor, Mapping):
        return None
    fields: list[Any] = [dtensor.get(k) for k in ("mesh", "placements", "kinds", "coordinate")]
    mesh, placements, kinds, coordinate = fields
    if not isinstance(mesh, Mapping) or not _lists(placements, kinds, coordinate, len(mesh)):
        return None
    names, sizes = tuple(map(str, mesh)), tuple(int(size) for size in mesh.values())
    shape = tuple(int(size) for size in dtensor.get("global_shape") or ())
    layout = Layout(shape, names, sizes, tuple(map(str, placements)), tuple(map(str, kinds)))
    return layout, tuple(int(index) for index in coordinate)


def _lists(*parts: Any) -> bool:
    """Whether every part but the last is a list (or tuple) as long as the last says."""
    *lists, length = parts
    return all(isinstance(part, list | tuple) and len(part) == length for part in lists)


@dataclass(frozen=True)
class Split:
    """A replica group whose ranks do not all hold equal local shards: its subgroups of equal
    value, largest first (ties: lowest rank first)."""

    subgroups: tuple[tuple[int, ...], ...]

    def odd(self) -> frozenset[int]:
        """Every rank outside the largest subgroup; every rank of the group when none is largest."""
        first, *others = self.subgroups
        if len(first) == len(others[0]):
            return frozenset(rank for subgroup in self.subgroups for rank in subgroup)
        return frozenset(rank for subgroup in others for rank in subgroup)


@dataclass(frozen=True)
class Replicas:
    """The ranks holding one DTensor, grouped by what must agree (see the module docstring)."""

    layout: Layout
    coordinates: Mapping[int, tuple[int, ...]]
    groups: tuple[tuple[int, ...], ...]
    """Replica groups: ranks of one mesh at equal coordinates on every mesh dim that is not replicated."""
    splits: tuple[Split, ...]
    """The replica groups whose ranks disagree."""
    meshes: tuple[tuple[int, ...], ...] = ()
    """The ranks on each mesh, when they are on several of one shape; empty when on one."""

    @property
    def odd(self) -> frozenset[int]:
        """The ranks worth a look: those that differ from their replicas."""
        return frozenset(rank for split in self.splits for rank in split.odd())

    def where(self, ranks: Sequence[int]) -> str:
        """`dp 1, tp 1`: the coordinates the ranks share, by mesh dim name."""
        dims = range(len(self.layout.names))
        shared = [dim for dim in dims if len({self.coordinates[rank][dim] for rank in ranks}) == 1]
        return ", ".join(f"{self.layout.names[dim]} {self.coordinates[ranks[0]][dim]}" for dim in shared)

    def verdict(self, tol: float | None = None) -> str:
        """`replicas agree along dp (2 groups of 2 ranks, each shard equal across dp); shards differ
        along tp by design (Shard(dim=0))`."""
        replicated = self.layout.dims(REPLICATE)
        parts = [self._replica_words(replicated, tol) if replicated else "no replicas to compare"]
        for kind, words in DESIGN.items():
            if dims := self.layout.dims(kind):
                placements = ", ".join(self.layout.placements[dim] for dim in dims)
                parts.append(words.format(along=self.layout.along(dims), placements=placements))
        said = "; ".join(parts)
        if not self.meshes:
            return said
        meshes = " | ".join(name_ranks(ranks) for ranks in self.meshes)
        return f"{len(self.meshes)} meshes ({meshes}), each on its own: {said}"

    def _replica_words(self, replicated: list[int], tol: float | None) -> str:
        """`replicas agree along dp (...)` or `replicas differ along dp: 1 of 2 groups split`."""
        along = self.layout.along(replicated)
        within = f" within tol {tol:g}" if tol is not None else ""
        count = len(self.groups)
        if self.splits and count == 1:
            return f"replicas differ along {along}{within}"
        if self.splits:
            return f"replicas differ along {along}{within}: {len(self.splits)} of {count} groups split"
        sizes = sorted({len(group) for group in self.groups})
        if sizes == [1]:
            return f"no replicas along {along} among these ranks"
        if count == 1:
            return f"replicas agree along {along}{within} (all {sizes[0]} ranks equal)"
        size = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        groups = f"{count} groups of {size} ranks, each shard equal across {along}"
        return f"replicas agree along {along}{within} ({groups})"

    def notes(self) -> list[str]:
        """`rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)`, one line per
        subgroup that differs from its group's largest, the first `ODD_NOTES` of them."""
        along = self.layout.along(self.layout.dims(REPLICATE))
        lines = []
        for split in self.splits:
            reference = split.subgroups[0]
            for subgroup in split.subgroups[1:]:
                verb = "differs" if len(subgroup) == 1 else "differ"
                replica = f"replica{_s(len(reference))}"
                lines.append(
                    f"{self._who(subgroup)} {verb} from its {along} {replica} {self._who(reference)}"
                )
        if len(lines) > ODD_NOTES:
            return [
                *lines[:ODD_NOTES],
                f"… and {len(lines) - ODD_NOTES} more that differ from their replicas",
            ]
        return lines

    def _who(self, ranks: Sequence[int]) -> str:
        """`rank 3 (dp 1, tp 1)` or `ranks 1,3 (tp 1)`."""
        where = self.where(ranks)
        return f"{name_ranks(ranks)} ({where})" if where else name_ranks(ranks)


def replicas(dtensors: Mapping[int, Any], same: Same) -> Replicas | None:
    """The replica check of one DTensor across the ranks in `dtensors` (rank -> its `dtensor`
    entry); None unless every entry has a layout and a coordinate and the layouts are one."""
    read = {rank: entry for rank, dtensor in dtensors.items() if (entry := layout_of(dtensor))}
    layouts = {layout for layout, _ in read.values()}
    if len(read) != len(dtensors) or len(layouts) != 1:
        return None
    layout = layouts.pop()
    coordinates = {rank: coordinate for rank, (_, coordinate) in read.items()}
    meshes = _by({rank: str(dtensors[rank].get("mesh_id")) for rank in read})
    fixed = [dim for dim, kind in enumerate(layout.kinds) if kind != REPLICATE]
    groups = _by(
        {rank: (mesh, *(coordinates[rank][dim] for dim in fixed)) for mesh in meshes for rank in mesh}
    )
    splits = tuple(split for group in groups if (split := _split(group, same)) is not None)
    return Replicas(layout, coordinates, groups, splits, meshes if len(meshes) > 1 else ())


def _by(keys: Mapping[int, Any]) -> tuple[tuple[int, ...], ...]:
    """Ranks grouped by equal keys, each group in rank order, groups in order of their lowest rank."""
    groups: dict[Any, list[int]] = {}
    for rank in sorted(keys):
        groups.setdefault(keys[rank], []).append(rank)
    return tuple(tuple(ranks) for ranks in groups.values())


def _split(group: Sequence[int], same: Same) -> Split | None:
    """The group's subgroups of equal value when there are several (greedily, in rank order,
    against each subgroup's first rank, as `:compare` groups values); None when all agree."""
    subgroups: list[list[int]] = []
    for rank in group:
        for subgroup in subgroups:
            if same(subgroup[0], rank):
                subgroup.append(rank)
                break
        else:
            subgroups.append([rank])
    if len(subgroups) == 1:
        return None
    ordered = sorted(subgroups, key=lambda subgroup: (-len(subgroup), subgroup[0]))
    return Split(tuple(tuple(subgroup) for subgroup in ordered))


def mismatch(dtensors: Mapping[int, Any]) -> str:
    """`DTensor layouts differ across ranks: rank 0 (Shard(dim=0)) on mesh tp=2 | rank 1 ...`."""
    groups: dict[str, set[int]] = {}
    for rank, dtensor in sorted(dtensors.items()):
        entry = layout_of(dtensor)
        text = entry[0].describe() if entry else "no coordinate on its mesh"
        if entry and entry[0].global_shape:
            text = f"[{', '.join(map(str, entry[0].global_shape))}] {text}"
        groups.setdefault(text, set()).add(rank)
    said = " | ".join(f"{name_ranks(ranks)} {text}" for text, ranks in groups.items())
    return f"DTensor layouts differ across ranks, compared as plain values: {said}"


def _s(count: int) -> str:
    """The plural ending for `count` things."""
    return "" if count == 1 else "s"
