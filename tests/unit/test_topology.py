"""The job's groups and meshes, put together from every rank's answer: coordinates, names, selection."""

from __future__ import annotations

from typing import Any

import pytest

from ddptui.core.commands.until import Stop, stop_from, table, verdict
from ddptui.core.model.topology import Topology

MESH = [[0, 1], [2, 3]]


def answer(rank: int) -> dict[str, Any]:
    """What rank `rank` of a 2x2 (dp, tp) mesh says, as `ddptui.rank.topology` would."""
    dp, tp = divmod(rank, 2)
    dp_group = {"name": str(1 + tp), "desc": "mesh_dp", "ranks": [tp, 2 + tp]}
    tp_group = {"name": str(3 + dp), "desc": "mesh_tp", "ranks": [2 * dp, 2 * dp + 1]}
    world = {"name": "0", "desc": "default_pg", "ranks": [0, 1, 2, 3]}
    mesh = {
        "dims": ["dp", "tp"],
        "ranks": MESH,
        "coordinate": [dp, tp],
        "groups": [dp_group["name"], tp_group["name"]],
    }
    return {"groups": [world, dp_group, tp_group], "meshes": [mesh]}


def test_coordinates_and_group_names_in_the_users_words() -> None:
    topology = Topology.from_answers(answer(r) for r in range(4))
    assert topology.where(3) == "dp 1, tp 1" and topology.label(2) == "rank 2 (dp 1, tp 0)"
    assert topology.group_name("4") == "tp group [2,3] (dp=1)"
    assert topology.group_name("2") == "dp group [1,3] (tp=1)"
    assert topology.group_name("0") == "WORLD"
    assert topology.group_name("9") == "group 9"


def test_a_group_not_known_yet_is_named_with_the_description_its_op_came_with() -> None:
    topology = Topology.from_answers(answer(r) for r in range(4))
    assert topology.group_name("9", "mesh_pp") == "group 9 (mesh_pp)"
    assert [topology.group_name("9", desc) for desc in ("", "undefined", "default_pg")] == ["group 9"] * 3
    assert topology.group_name("4", "mesh_tp") == "tp group [2,3] (dp=1)"  # known: its own name
    assert topology.group_name("0", "mesh_tp") == "WORLD"


def test_until_collective_names_groups_as_the_topology_does() -> None:
    def stop(rank: int, seq: int, pg: str, desc: str) -> Stop:
        """A rank stopped before an all_reduce on group `pg`."""
        value = {"seq": seq, "op": "all_reduce", "shapes": [[3]], "dtypes": ["float32"], "pg": pg}
        return stop_from(rank, "paused", dict(value, pg_desc=desc), inside=False)

    (finding,) = verdict([stop(0, 2, "9", "mesh_pp"), stop(1, 3, "9", "mesh_pp")], {})
    assert finding.text.startswith(
        "mismatch: the ranks stand before different collectives on group 9 (mesh_pp):"
    )
    assert table([stop(0, 2, "9", "")])[1] == "0     #2 on group 9  all_reduce  [3]     float32  -"


def test_a_group_outside_any_mesh_is_named_by_its_members() -> None:
    pairs = [
        {"groups": [{"name": "1", "desc": "", "ranks": [0, 1]}, {"name": "2", "desc": "", "ranks": [2, 3]}]}
    ]
    topology = Topology.from_answers(pairs)
    assert topology.group_name("2") == "group [2,3]" and topology.where(2) == ""


def test_selection_by_coordinates() -> None:
    topology = Topology.from_answers(answer(r) for r in range(4))
    assert topology.select("tp=0") == {0, 2}
    assert topology.select("dp=1,tp=0-1") == {2, 3}
    with pytest.raises(ValueError, match="no mesh dim 'pp'"):
        topology.select("pp=0")
    with pytest.raises(ValueError, match="no device mesh"):
        Topology().select("tp=0")


def test_answers_add_up_and_malformed_parts_are_skipped() -> None:
    first = Topology.from_answers([answer(0)])
    assert "4" not in first.groups
    both = Topology.from_answers(
        [answer(3), {"groups": [{"ranks": "x"}], "meshes": [{"dims": ["a"], "ranks": [[1]]}]}], first
    )
    assert (
        set(both.groups) == {"0", "1", "2", "3", "4"} and both.mesh is not None and both.mesh.shape == (2, 2)
    )
    assert both.describe()[0] == "mesh dp=2 × tp=2"
