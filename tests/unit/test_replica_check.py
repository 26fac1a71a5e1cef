"""`:ddp-check` beyond DDP: DTensor parameters and gradients whose replicas (along replicated mesh
dims) differ, from hand-made `replicas` answers of a 2x2 (dp, tp) mesh."""

from __future__ import annotations

from typing import Any

from ddptui.core.diagnosis.ddp_check import NO_GRADIENTS, replica_check_lines, replica_lines

MESH = {"dp": 2, "tp": 2}
"""Rank = 2 * dp + tp."""
KINDS = {"Replicate()": "replicate", "Partial(sum)": "partial"}
"""The kind the rank side gives a placement (any other: shard)."""
LAYOUTS = {
    "0.weight": ["_StridedShard(dim=0, sf=2)", "Shard(dim=0)"],
    "2.bias": ["Shard(dim=0)", "Replicate()"],
    "table": ["Replicate()", "Shard(dim=0)"],
}
"""What FSDP2 around tensor parallel gives a Colwise weight and a Rowwise bias, and a tensor
replicated across dp."""


def entry(name: str, rank: int, value: str = "", placements: list[str] | None = None) -> dict[str, Any]:
    """One tensor of a `replicas` answer: its local shard's content is `value` (default: what the
    rank's coordinate on the unreplicated dims says it holds)."""
    placements = placements or LAYOUTS[name]
    kinds = [KINDS.get(p, "shard") for p in placements]
    coordinate = list(divmod(rank, 2))
    held = [index for index, kind in zip(coordinate, kinds, strict=True) if kind != "replicate"]
    dtensor = {
        "global_shape": [8],
        "placements": placements,
        "kinds": kinds,
        "mesh": MESH,
        "coordinate": coordinate,
    }
    return {"name": name, "key": value or f"{name}{held}", "mean": 0.1, "norm": 1.0, "dtensor": dtensor}


def module(rank: int, odd: dict[str, str] | None = None, grads: bool = True) -> dict[str, Any]:
    """A rank's sharded module: its tensors as the mesh lays them out, `odd` ones holding other values."""
    params = [entry(name, rank, (odd or {}).get(name, "")) for name in LAYOUTS]
    return {"type": "FSDPSequential", "params": params, "grads": params if grads else []}


def test_replicas_that_agree() -> None:
    lines = replica_check_lines({rank: [module(rank)] for rank in range(4)})
    equal = "replicas equal (1 replicated along tp; 1 replicated along dp; 1 sharded on every mesh dim)"
    assert lines == [
        "sharded module FSDPSequential on ranks 0-3: 3 parameters, DTensors on mesh dp=2 tp=2",
        f"parameters: {equal}",
        f"gradients: {equal}",
    ]


def test_a_parameter_whose_replica_differs_is_named_with_the_ranks_coordinates() -> None:
    answers = {rank: [module(rank)] for rank in range(3)}
    answers[3] = [module(3, {"table": "nudged"})]
    lines = replica_check_lines(answers)
    assert lines[1:3] == [
        "parameter table: rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)",
        "parameters: 1 of 3 differ from their replicas",
    ]
    assert lines[3:] == [
        "gradient table: rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)",
        "gradients: 1 of 3 differ from their replicas",
    ]


def test_before_backward_there_are_no_gradients() -> None:
    lines = replica_check_lines({rank: [module(rank, grads=False)] for rank in range(4)})
    assert lines[-1] == NO_GRADIENTS


def test_fully_sharded_parameters_have_nothing_to_compare() -> None:
    placements = ["Shard(dim=0)", "Shard(dim=1)"]
    tensors = {
        rank: [entry("w", rank, placements=placements), entry("b", rank, placements=placements)]
        for rank in range(4)
    }
    assert replica_lines("parameter", tensors) == [
        "parameters: no replicas to compare: all 2 sharded on every mesh dim"
    ]


def test_a_plain_parameter_must_be_equal_on_every_rank() -> None:
    tensors = {
        rank: [{"name": "norm.weight", "key": "a" if rank != 2 else "b", "dtensor": None}]
        for rank in range(4)
    }
    assert replica_lines("parameter", tensors) == [
        "parameter norm.weight: not a DTensor, differs across ranks: ranks 0-1,3 | rank 2",
        "parameters: 1 of 1 differ from their replicas",
    ]
    same = {rank: [{"name": "norm.weight", "key": "a", "dtensor": None}] for rank in range(2)}
    assert replica_lines("parameter", same) == [
        "parameters: replicas equal (1 plain tensor, equal on every rank)"
    ]


def test_a_layout_that_differs_across_ranks_is_said() -> None:
    tensors = {rank: [entry("table", rank)] for rank in range(3)}
    tensors[3] = [entry("table", 3, placements=["Shard(dim=0)", "Shard(dim=0)"])]
    said = replica_lines("parameter", tensors)
    assert said[0].startswith(
        "parameter table: DTensor layouts differ across ranks, compared as plain values: ranks 0-2"
    )


def test_many_differing_tensors_are_counted_past_a_few() -> None:
    names = [f"layer{i}.bias" for i in range(5)]
    placements = ["Shard(dim=0)", "Replicate()"]
    tensors = {rank: [entry(name, rank, f"{name}{rank}", placements) for name in names] for rank in range(4)}
    said = replica_lines("gradient", tensors)
    assert said[-2:] == [
        "… and 2 more gradients whose replicas differ",
        "gradients: 5 of 5 differ from their replicas",
    ]
    assert (
        said[0] == "gradient layer0.bias: rank 1 (dp 0, tp 1) differs from its tp replica rank 0 (dp 0, tp 0)"
    )
