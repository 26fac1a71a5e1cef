"""This rank's process groups and device meshes, for the core's mesh coordinates and group names.

Standard library only: torch is reached through `sys.modules`. Every `DeviceMesh` the job creates
is remembered as it is made (`track_meshes`, an import hook, weak references only); process
groups are read from torch's own registry when asked. A rank knows only the groups it is a member
of: the core puts every rank's answer together.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any

from ddptui.rank.hooks import C10D, when_imported

DEVICE_MESH = "torch.distributed.device_mesh"
_meshes: list[weakref.ref[Any]] = []


def track_meshes() -> None:
    """Remember every DeviceMesh made from now on (for the rank's start-up: one import hook)."""
    when_imported(DEVICE_MESH, _patch_mesh_class)


def _patch_mesh_class(module: Any) -> None:
    """Wrap `DeviceMesh.__init__` so that each new mesh is remembered, weakly."""
    cls = getattr(module, "DeviceMesh", None)
    original = getattr(cls, "__init__", None)
    if cls is None or original is None or getattr(original, "__ddptui__", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _meshes.append(weakref.ref(self))

    __init__.__ddptui__ = True  # type: ignore[attr-defined]
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__


def topology() -> dict[str, Any]:
    """`{"groups": [...], "meshes": [...]}` as this rank knows them; never raises.

    A group: `name`, `desc` (`default_pg`, `mesh_tp`, ...) and `ranks` (global ranks, in group
    rank order). A mesh: `dims` (names; `dim0`... when unnamed), `ranks` (the mesh's global ranks,
    nested by dim), `coordinate` (this rank's) and `groups` (the group name of each dim, for this
    rank). A failure is an `error` entry beside what could be read.
    """
    found: dict[str, Any] = {"groups": [], "meshes": []}
    try:
        found["groups"] = _groups()
        found["meshes"] = [m for m in map(_mesh, _live_meshes()) if m is not None]
    except Exception as exc:  # a question must never hurt the rank
        found["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return found


def _groups() -> list[dict[str, Any]]:
    """Every process group this rank is a member of."""
    c10d = sys.modules.get(C10D)
    world = getattr(c10d, "_world", None)
    if world is None:
        return []
    groups = []
    for pg, name in list(world.pg_names.items()):
        members = world.pg_group_ranks.get(pg, {})
        ranks = [g for g, _ in sorted(members.items(), key=lambda item: item[1])]
        groups.append({"name": str(name), "desc": str(getattr(pg, "group_desc", "")), "ranks": ranks})
    return groups


def _live_meshes() -> list[Any]:
    """The meshes still alive, each once (a mesh sliced from another is a mesh of its own)."""
    alive = [mesh for mesh in (ref() for ref in _meshes) if mesh is not None]
    _meshes[:] = [weakref.ref(mesh) for mesh in alive]
    return alive


def _mesh(mesh: Any) -> dict[str, Any] | None:
    """One mesh as JSON; None for a mesh this rank is not in."""
    coordinate = mesh.get_coordinate()
    if coordinate is None:
        return None
    dims = list(mesh.mesh_dim_names or (f"dim{i}" for i in range(mesh.ndim)))
    groups = []
    for dim in range(mesh.ndim):
        try:
            groups.append(str(mesh.get_group(dim).group_name))
        except Exception:  # a dim without a group of its own (a flattened mesh's parent, say)
            groups.append("")
    return {"dims": dims, "ranks": mesh.mesh.tolist(), "coordinate": list(coordinate), "groups": groups}
