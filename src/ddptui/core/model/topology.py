"""`Topology`: the job's process groups and device meshes, put together from every rank's answer.

A rank knows the groups it is a member of and the meshes it is in (`ddptui.rank.topology`); the
names of groups are the same on every rank (torch creates each group on all ranks, in order).
From them: each rank's mesh coordinates (`dp 1, tp 1`), each group's name in the user's words
(`tp group [2,3] (dp=1)`, `WORLD`, `group [0,1]`), and rank sets by coordinates (`tp=0`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ddptui.core.model.targets import format_ranks

WORLD_NAME = "0"
"""The default process group's name."""
UNNAMED_GROUPS = frozenset({"", "undefined", "default_pg"})
"""Descriptions torch gives groups that say nothing of them."""


@dataclass(frozen=True)
class Group:
    """One process group: its name, torch's description of it, its global ranks in group order."""

    name: str
    desc: str
    ranks: tuple[int, ...]


@dataclass(frozen=True)
class Mesh:
    """One device mesh: its dim names and the global rank at each coordinate."""

    dims: tuple[str, ...]
    at: Mapping[int, tuple[int, ...]]
    """Each rank's coordinate in the mesh."""

    @property
    def shape(self) -> tuple[int, ...]:
        """The size of each dim."""
        return tuple(max(c[i] for c in self.at.values()) + 1 for i in range(len(self.dims)))

    def along(self, rank: int, dim: int) -> tuple[int, ...]:
        """The ranks that share `rank`'s coordinate except along `dim`, in order along it."""
        here = self.at[rank]
        same = (r for r, c in self.at.items() if all(c[i] == here[i] for i in range(len(c)) if i != dim))
        return tuple(sorted(same, key=lambda r: self.at[r][dim]))


@dataclass(frozen=True)
class Topology:
    """What is known of the job's groups and meshes; empty until a rank has answered."""

    groups: Mapping[str, Group] = field(default_factory=dict)
    meshes: tuple[Mesh, ...] = ()

    @classmethod
    def from_answers(cls, answers: Iterable[Mapping[str, Any]], known: Topology | None = None) -> Topology:
        """Put together ranks' `topology` answers (malformed parts are skipped), on top of `known`."""
        groups = dict(known.groups) if known else {}
        meshes = {(m.dims, tuple(sorted(m.at.items()))): m for m in (known.meshes if known else ())}
        for answer in answers:
            for entry in _list(answer.get("groups")):
                group = _group(entry)
                if group is not None:
                    groups[group.name] = group
            for entry in _list(answer.get("meshes")):
                mesh = _mesh(entry)
                if mesh is not None:
                    meshes[(mesh.dims, tuple(sorted(mesh.at.items())))] = mesh
        return cls(groups, tuple(meshes.values()))

    @property
    def mesh(self) -> Mesh | None:
        """The job's main mesh: the one over the most ranks, then with the most dims."""
        if not self.meshes:
            return None
        return max(self.meshes, key=lambda m: (len(m.at), len(m.dims)))

    def coordinates(self, rank: int) -> tuple[tuple[str, int], ...]:
        """`(("dp", 1), ("tp", 1))`: the rank's place in the main mesh; empty when it is in none."""
        mesh = self.mesh
        if mesh is None or rank not in mesh.at:
            return ()
        return tuple(zip(mesh.dims, mesh.at[rank], strict=True))

    def where(self, rank: int) -> str:
        """`dp 1, tp 1`, or empty without a mesh."""
        return ", ".join(f"{dim} {index}" for dim, index in self.coordinates(rank))

    def label(self, rank: int) -> str:
        """`rank 3 (dp 1, tp 1)`, or `rank 3`."""
        where = self.where(rank)
        return f"rank {rank} ({where})" if where else f"rank {rank}"

    def group_name(self, name: str, desc: str = "") -> str:
        """A group in the user's words: `tp group [2,3] (dp=1)`, `WORLD`, `group [0,1]`, `group 7`;
        a group not known yet with the description its op came with, `group 7 (mesh_tp)`."""
        group = self.groups.get(name)
        if name == WORLD_NAME or (group is not None and group.desc == "default_pg"):
            return "WORLD"
        if group is None:
            return f"group {name}" + (f" ({desc})" if desc not in UNNAMED_GROUPS else "")
        members = f"[{','.join(str(r) for r in group.ranks)}]"
        dim = self._mesh_dim(group)
        if dim is None:
            return f"group {members}"
        mesh, index = dim
        fixed = [(d, mesh.at[group.ranks[0]][i]) for i, d in enumerate(mesh.dims) if i != index]
        rest = f" ({', '.join(f'{d}={c}' for d, c in fixed)})" if fixed else ""
        return f"{mesh.dims[index]} group {members}{rest}"

    def _mesh_dim(self, group: Group) -> tuple[Mesh, int] | None:
        """The mesh and dim whose slice through the group's first rank is exactly the group."""
        for mesh in sorted(self.meshes, key=lambda m: -len(m.at)):
            if not group.ranks or group.ranks[0] not in mesh.at:
                continue
            for index in range(len(mesh.dims)):
                if set(mesh.along(group.ranks[0], index)) == set(group.ranks):
                    return mesh, index
        return None

    def select(self, text: str) -> frozenset[int]:
        """The ranks whose coordinates match `dp=1,tp=0-1` (every term must hold); ValueError if not."""
        mesh = self.mesh
        if mesh is None:
            raise ValueError(f"no device mesh known yet to select {text!r} by (:mesh shows what is known)")
        wanted: dict[int, set[int]] = {}
        for term in filter(None, (t.strip() for t in text.split(","))):
            dim, _, span = term.partition("=")
            if dim.strip() not in mesh.dims:
                raise ValueError(f"no mesh dim {dim.strip()!r} (the mesh has {', '.join(mesh.dims)})")
            wanted[mesh.dims.index(dim.strip())] = _span(span, term)
        return frozenset(r for r, c in mesh.at.items() if all(c[i] in s for i, s in wanted.items()))

    def describe(self) -> list[str]:
        """`:mesh`: the main mesh laid out, then every group known, by name."""
        lines = []
        mesh = self.mesh
        if mesh is not None:
            shape = " × ".join(f"{d}={n}" for d, n in zip(mesh.dims, mesh.shape, strict=True))
            lines.append(f"mesh {shape}")
            lines += [f"  {self.label(rank)}" for rank in sorted(mesh.at)]
        for name in sorted(self.groups, key=_natural):
            group = self.groups[name]
            desc = f" ({group.desc})" if group.desc not in ("", "default_pg", "undefined") else ""
            lines.append(
                f"group {name}: {self.group_name(name)}{desc}, ranks {format_ranks(set(group.ranks))}"
            )
        return lines or ["no process group or device mesh known yet (has the job called init_process_group?)"]


def _span(text: str, term: str) -> set[int]:
    """`0-1` or `2` as a set of indices."""
    low, sep, high = text.strip().partition("-")
    try:
        return set(range(int(low), int(high if sep else low) + 1))
    except ValueError:
        raise ValueError(f"not a coordinate: {term!r} (use e.g. tp=0 or dp=0-1)") from None


def _natural(name: str) -> tuple[int, str]:
    """Group names in numeric order where they are numbers."""
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def _list(value: Any) -> list[Any]:
    """`value` when it is a list, else empty."""
    return value if isinstance(value, list) else []


def _group(entry: Any) -> Group | None:
    """A group from a rank's answer, or None when malformed."""
    if not isinstance(entry, dict) or not isinstance(entry.get("ranks"), list):
        return None
    if not all(isinstance(r, int) for r in entry["ranks"]):
        return None
    return Group(str(entry.get("name", "")), str(entry.get("desc", "")), tuple(entry["ranks"]))


def _mesh(entry: Any) -> Mesh | None:
    """A mesh from a rank's answer, or None when malformed."""
    if not isinstance(entry, dict) or not isinstance(entry.get("dims"), list):
        return None
    dims = tuple(str(d) for d in entry["dims"])
    at: dict[int, tuple[int, ...]] = {}
    try:
        _place(entry.get("ranks"), (), len(dims), at)
    except (TypeError, ValueError):
        return None
    return Mesh(dims, at) if at else None


def _place(nested: Any, where: tuple[int, ...], depth: int, at: dict[int, tuple[int, ...]]) -> None:
    """Record the coordinate of every rank in a nested list `depth` levels deep."""
    if len(where) == depth:
        if not isinstance(nested, int):
            raise TypeError("a mesh's leaves are ranks")
        at[nested] = where
        return
    if not isinstance(nested, list):
        raise TypeError("a mesh is nested lists")
    for index, inner in enumerate(nested):
        _place(inner, (*where, index), depth, at)
