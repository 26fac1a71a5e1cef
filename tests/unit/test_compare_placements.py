"""`:compare` of a DTensor: replicas must agree, shards differ by design, partial sums are not compared."""

from __future__ import annotations

from typing import Any

from ddptui.core.diagnosis.compare import Answer, Comparison, compare
from ddptui.core.diagnosis.placements import layout_of, replicas

MESH = {"dp": 2, "tp": 2}
"""A 2x2 mesh, rank = 2 * dp + tp, as `init_device_mesh("cpu", (2, 2), ...)` lays it out."""
DP_TP = ["Replicate()", "Shard(dim=0)"]
"""Replicated across dp, sharded across tp: DDP (or HSDP's replicate dim) around tensor parallel."""


def kind(placement: str) -> str:
    """The kind the rank side gives a placement."""
    return {"Replicate()": "replicate", "Partial(sum)": "partial"}.get(placement, "shard")


def shard(value: str, rank: int, placements: list[str], mesh: dict[str, int] | None = None) -> dict[str, Any]:
    """A rank's summary of a DTensor whose local shard holds `value` (its content hash)."""
    mesh = mesh or MESH
    coordinate, rest = [], rank
    for size in reversed(list(mesh.values())):
        rest, index = divmod(rest, size)
        coordinate.insert(0, index)
    dtensor = {
        "global_shape": [8],
        "placements": placements,
        "kinds": [kind(p) for p in placements],
        "mesh": mesh,
        "coordinate": coordinate,
    }
    info = {"shape": [4], "dtype": "float32", "device": "cpu", "local": True, "mean": 0.5, "hash": value}
    return {
        "repr": "DTensor(...)",
        "key": f"tensor:float32[4]#{value}",
        "tensor": {**info, "dtensor": dtensor},
    }


def by_tp(values: dict[int, str], placements: list[str] = DP_TP) -> dict[int, Answer]:
    """Every rank of the 2x2 mesh holding the value given for it."""
    return {rank: shard(value, rank, placements) for rank, value in values.items()}


def rows(comparison: Comparison) -> list[tuple[set[int], bool]]:
    """Each row's ranks and whether it is odd."""
    return [(set(row.ranks), row.odd) for row in comparison.rows]


def test_shards_differ_by_design_and_replicas_agree() -> None:
    comparison = compare(by_tp({0: "a", 1: "b", 2: "a", 3: "b"}))
    assert comparison.verdict == (
        "replicas agree along dp (2 groups of 2 ranks, each shard equal across dp); "
        "shards differ along tp by design (Shard(dim=0))"
    )
    assert rows(comparison) == [({0, 2}, False), ({1, 3}, False)]
    assert comparison.notes == ()


def test_an_odd_replica_is_named_with_its_coordinate() -> None:
    comparison = compare(by_tp({0: "a", 1: "b", 2: "a", 3: "c"}))
    assert comparison.verdict.startswith("replicas differ along dp: 1 of 2 groups split; shards differ")
    assert comparison.notes == ("rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)",)
    assert rows(comparison) == [({0, 2}, False), ({1}, True), ({3}, True)]  # two replicas: no majority
    lines = comparison.lines(120)
    assert lines[1] == comparison.notes[0] and lines[2].startswith("  ranks 0,2 │ tensor([4]")


def test_the_majority_of_replicas_is_not_odd() -> None:
    mesh = {"dp": 3, "tp": 2}
    answers: dict[int, Answer] = {rank: shard("ab"[rank % 2], rank, DP_TP, mesh) for rank in range(6)}
    answers[5] = shard("z", 5, DP_TP, mesh)
    comparison = compare(answers)
    assert rows(comparison) == [({0, 2, 4}, False), ({1, 3}, False), ({5}, True)]
    assert comparison.notes == ("rank 5 (dp 2, tp 1) differs from its dp replicas ranks 1,3 (tp 1)",)


def test_replicas_along_tp_inside_dp_shards() -> None:
    comparison = compare(by_tp({0: "a", 1: "a", 2: "b", 3: "b"}, ["Shard(dim=0)", "Replicate()"]))
    assert comparison.verdict == (
        "replicas agree along tp (2 groups of 2 ranks, each shard equal across tp); "
        "shards differ along dp by design (Shard(dim=0))"
    )


def test_a_tensor_sharded_on_every_dim_has_nothing_that_must_agree() -> None:
    placements = ["_StridedShard(dim=0, sf=2)", "Shard(dim=0)"]
    comparison = compare(by_tp({0: "a", 1: "b", 2: "c", 3: "d"}, placements))
    assert comparison.verdict == (
        "no replicas to compare; shards differ along dp, tp by design "
        "(_StridedShard(dim=0, sf=2), Shard(dim=0))"
    )
    assert not any(row.odd for row in comparison.rows) and len(comparison.rows) == 4


def test_one_dim_tp_shards_are_not_two_distinct_values() -> None:
    answers: dict[int, Answer] = {r: shard("ab"[r], r, ["Shard(dim=0)"], {"tp": 2}) for r in range(2)}
    comparison = compare(answers)
    assert comparison.verdict == "no replicas to compare; shards differ along tp by design (Shard(dim=0))"
    assert rows(comparison) == [({0}, False), ({1}, False)]


def test_partial_sums_are_not_compared_but_their_replicas_are() -> None:
    placements = ["Replicate()", "Partial(sum)"]
    comparison = compare(by_tp({0: "a", 1: "b", 2: "a", 3: "c"}, placements))
    assert comparison.verdict == (
        "replicas differ along dp: 1 of 2 groups split; "
        "partial sums along tp are not comparable (Partial(sum))"
    )
    assert comparison.notes == ("rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)",)
    alone = compare({r: shard("ab"[r], r, ["Partial(sum)"], {"tp": 2}) for r in range(2)})
    assert alone.verdict == "no replicas to compare; partial sums along tp are not comparable (Partial(sum))"


def test_a_fully_replicated_dtensor_is_all_equal_or_names_the_odd_rank() -> None:
    both = ["Replicate()", "Replicate()"]
    assert compare(by_tp(dict.fromkeys(range(4), "a"), both)).verdict == (
        "replicas agree along dp, tp (all 4 ranks equal)"
    )
    odd = compare(by_tp({0: "a", 1: "a", 2: "b", 3: "a"}, both))
    assert odd.verdict == "replicas differ along dp, tp"
    assert odd.notes == ("rank 2 (dp 1, tp 0) differs from its dp, tp replicas ranks 0-1,3",)
    assert rows(odd) == [({0, 1, 3}, False), ({2}, True)]


def test_errors_and_a_tolerance_keep_their_say() -> None:
    answers = by_tp({0: "a", 1: "b", 2: "a"})
    answers[3] = "NameError: name 'w' is not defined"
    comparison = compare(answers)
    assert comparison.verdict.startswith("replicas agree along dp (2 groups of 1-2 ranks")
    assert comparison.verdict.endswith("by design (Shard(dim=0)), 1 error")
    assert rows(comparison)[-1] == ({3}, True) and comparison.rows[-1].error
    close = by_tp({0: "a", 1: "b", 2: "a2", 3: "b"})
    close[2]["tensor"]["mean"] = 0.5000001
    assert compare(close).notes and not compare(close, tol=1e-3).notes
    assert compare(close, tol=1e-3).verdict.startswith("replicas agree along dp within tol 0.001 (")


def test_ranks_that_hold_no_replica_of_each_other_say_so() -> None:
    comparison = compare(by_tp({0: "a", 1: "b"}))
    assert comparison.verdict.startswith("no replicas along dp among these ranks; shards differ along tp")


def test_layouts_that_differ_across_ranks_are_compared_as_plain_values() -> None:
    answers = by_tp({0: "a", 1: "b", 2: "a", 3: "b"})
    answers[3] = shard("b", 3, ["Shard(dim=0)", "Shard(dim=0)"])
    comparison = compare(answers)
    assert comparison.verdict == "2 distinct values"
    assert comparison.notes == (
        "DTensor layouts differ across ranks, compared as plain values: ranks 0-2 [8] (Replicate(), "
        "Shard(dim=0)) on mesh dp=2 tp=2 | rank 3 [8] (Shard(dim=0), Shard(dim=0)) on mesh dp=2 tp=2",
    )


def test_a_mix_of_dtensors_and_plain_values_compares_as_today() -> None:
    answers = by_tp({0: "a", 1: "b"})
    answers[2] = {"repr": "1", "key": "int:1", "number": 1}
    comparison = compare(answers)
    assert comparison.verdict == "3 distinct values" and comparison.notes == ()


def test_many_odd_replicas_are_counted_past_a_few() -> None:
    mesh = {"dp": 2, "tp": 8}
    answers: dict[int, Answer] = {rank: shard(f"v{rank}", rank, DP_TP, mesh) for rank in range(16)}
    notes = compare(answers).notes
    assert len(notes) == 5 and notes[-1] == "… and 4 more that differ from their replicas"


def two_meshes() -> dict[int, Answer]:
    """A DTensor replicated on `mesh["tp"]` of a 2x2 (dp, tp) mesh: ranks 0-1 hold one, ranks 2-3 another."""
    answers: dict[int, Answer] = {r: shard("ab"[r // 2], r, ["Replicate()"], {"tp": 2}) for r in range(4)}
    for rank, answer in answers.items():
        answer["tensor"]["dtensor"].update(coordinate=[rank % 2], mesh_id=f"mesh{rank // 2}")
    return answers


def test_ranks_on_two_meshes_of_one_shape_are_not_each_others_replicas() -> None:
    comparison = compare(two_meshes())
    assert comparison.verdict == (
        "2 meshes (ranks 0-1 | ranks 2-3), each on its own: "
        "replicas agree along tp (2 groups of 2 ranks, each shard equal across tp)"
    )
    assert rows(comparison) == [({0, 1}, False), ({2, 3}, False)]


def test_a_rank_outside_the_mesh_has_no_layout() -> None:
    outside = shard("a", 0, DP_TP)
    outside["tensor"]["dtensor"]["coordinate"] = None
    assert layout_of(outside["tensor"]["dtensor"]) is None
    assert replicas({0: outside["tensor"]["dtensor"]}, lambda a, b: True) is None


def test_a_long_verdict_goes_on_at_its_clauses() -> None:
    placements = ["Shard(dim=0)", "Replicate()"]
    lines = compare(by_tp({0: "a", 1: "a", 2: "b", 3: "b"}, placements)).lines(80)
    assert lines[:2] == [
        "replicas agree along tp (2 groups of 2 ranks, each shard equal across tp);",
        "  shards differ along dp by design (Shard(dim=0))",
    ]
    assert lines[2].startswith("  ranks 0-1 │ tensor(")


def test_a_verdict_on_two_meshes_goes_on_after_its_colon() -> None:
    assert compare(two_meshes()).lines(80)[:2] == [
        "2 meshes (ranks 0-1 | ranks 2-3), each on its own:",
        "  replicas agree along tp (2 groups of 2 ranks, each shard equal across tp)",
    ]
