"""Ranks as a slice of the job's device mesh, in a few characters: `dp1 tp1`, `tp0`, `dp0-1`.

The rank bar names a group of ranks this way beside their numbers, and the state grid says
which slice of the mesh stands at a location. A rank set that is not a box of the mesh (every
combination of the coordinates it spans) has no such words.
"""

from __future__ import annotations

from collections.abc import Collection

from ddptui.core.model.targets import format_ranks
from ddptui.core.model.topology import Mesh


def slice_words(mesh: Mesh | None, ranks: Collection[int]) -> str:
    """`dp1 tp1` for one rank, `tp0` for a column of the mesh; empty for the whole mesh, for
    ranks that are not a box of it, and without a mesh.

    Dims the ranks span whole are left out (a dim of size 1 always is): the rank numbers beside
    these words say the rest.
    """
    if mesh is None or not ranks or any(rank not in mesh.at for rank in ranks):
        return ""
    spans = [{mesh.at[rank][dim] for rank in ranks} for dim in range(len(mesh.dims))]
    box = 1
    for span in spans:
        box *= len(span)
    if box != len(ranks):  # ranks are distinct, so they fill the box exactly when the sizes agree
        return ""
    return " ".join(
        f"{name}{format_ranks(span)}"
        for name, span, size in zip(mesh.dims, spans, mesh.shape, strict=True)
        if len(span) < size
    )
