"""`:compare` and `:ddp-check` of DTensors on real ranks: tensor parallel, FSDP2, HSDP and a 2x2
(dp, tp) mesh; shards differ by design, replicas must agree, a nudged replica is named."""

from __future__ import annotations

from conftest import SCRIPTS, Runner
from test_compare_ranks import block


def run(ddptui: Runner, script: str, commands: list[str], *args: str, nproc: int = 2) -> str:
    """A batch session on `tests/scripts/SCRIPT ARGS`: its output, once every rank exited 0."""
    argv = ["--nproc-per-node", str(nproc), "--stall-timeout", "10", "--batch", "-", str(SCRIPTS / script)]
    result = ddptui.run(*argv, *args, stdin="\n".join(commands) + "\n", timeout=300)
    assert result.returncode == 0 and f"rank {nproc - 1}: exited 0" in result.stdout, result.stdout[-3000:]
    return result.stdout


def after_step(stdout: str) -> str:
    """The output from the second breakpoint on (after the training step)."""
    return stdout.split("(ddptui) c\n", 1)[1]


def test_tp_shards_differ_by_design_and_a_nudged_replica_is_caught(ddptui: Runner) -> None:
    checks = [":compare model[0].weight", ":compare model[2].bias", ":ddp-check"]
    out = run(ddptui, "tp_step.py", [*checks, "c", *checks, "c"], "odd")
    weight = block(out, ":compare model[0].weight")
    assert weight[0] == "no replicas to compare; shards differ along tp by design (Shard(dim=0))"
    assert [line[:10] for line in weight[1:]] == ["  rank 0  ", "  rank 1  "]
    assert block(out, ":compare model[2].bias")[0] == "replicas agree along tp (all 2 ranks equal)"
    assert block(out, ":ddp-check") == [
        "sharded module Sequential on ranks 0-1: 4 parameters, DTensors on mesh tp=2",
        "parameters: replicas equal (1 replicated along tp; 3 sharded on every mesh dim)",
        "no gradients yet: run :ddp-check after loss.backward() (and before optimizer.zero_grad())",
    ]
    later = after_step(out)
    bias = block(later, ":compare model[2].bias")
    assert bias[:2] == ["replicas differ along tp", "rank 1 (tp 1) differs from its tp replica rank 0 (tp 0)"]
    assert block(later, ":ddp-check")[1:] == [
        "parameter 2.bias: rank 1 (tp 1) differs from its tp replica rank 0 (tp 0)",
        "parameters: 1 of 4 differ from their replicas",
        "gradient 2.bias: rank 1 (tp 1) differs from its tp replica rank 0 (tp 0)",
        "gradients: 1 of 4 differ from their replicas",
    ]


def test_fsdp2_on_one_mesh_dim_has_no_replicas(ddptui: Runner) -> None:
    checks = [":compare model[0].weight", ":ddp-check"]
    out = run(ddptui, "fsdp2_step.py", [*checks, "c", *checks, "c"])
    weight = block(out, ":compare model[0].weight")
    assert weight[0] == "no replicas to compare; shards differ along dim0 by design (Shard(dim=0))"
    assert not any(line.startswith("≠") for line in weight)
    later = block(after_step(out), ":ddp-check")
    assert later == [
        "sharded module FSDPSequential on ranks 0-1: 4 parameters, DTensors on mesh dim0=2",
        "parameters: no replicas to compare: all 4 sharded on every mesh dim",
        "gradients: no replicas to compare: all 4 sharded on every mesh dim",
    ]


def test_hsdp_replicas_agree_until_one_rank_nudges_its_shard(ddptui: Runner) -> None:
    checks = [":compare model[0].weight", ":ddp-check"]
    out = run(ddptui, "fsdp2_step.py", [*checks, "c", *checks, "c"], "hsdp", nproc=4)
    assert block(out, ":compare model[0].weight")[:2] == [
        "replicas agree along replicate (2 groups of 2 ranks, each shard equal across replicate);",
        "  shards differ along shard by design (Shard(dim=0))",
    ]
    assert block(out, ":ddp-check")[1] == "parameters: replicas equal (4 replicated along replicate)"
    later = after_step(out)
    odd = "rank 3 (replicate 1, shard 1) differs from its replicate replica rank 1 (replicate 0, shard 1)"
    weight = block(later, ":compare model[0].weight")
    assert weight[1] == odd and [line[:10] for line in weight[2:]] == [
        "  ranks 0,",
        "≠ rank 1  ",
        "≠ rank 3  ",
    ]
    assert block(later, ":ddp-check")[1:] == [
        f"parameter 0.weight: {odd}",
        "parameters: 1 of 4 differ from their replicas",
        "gradients: replicas equal (4 replicated along replicate)",
    ]


def test_a_2d_mesh_checks_replicas_along_each_replicated_dim(ddptui: Runner) -> None:
    checks = [":compare table", ":compare model[2].bias", ":compare model[0].weight", ":ddp-check"]
    out = run(ddptui, "mesh_2d_step.py", [*checks, ":compare per_dp", "c", *checks, "c"], "odd", nproc=4)
    assert block(out, ":compare per_dp")[:2] == [
        "2 meshes (ranks 0-1 | ranks 2-3), each on its own:",
        "  replicas agree along tp (2 groups of 2 ranks, each shard equal across tp)",
    ]
    assert block(out, ":compare table")[:2] == [
        "replicas agree along dp (2 groups of 2 ranks, each shard equal across dp);",
        "  shards differ along tp by design (Shard(dim=0))",
    ]
    assert block(out, ":compare model[2].bias")[0].startswith("replicas agree along tp (2 groups of 2 ranks")
    shards = "(_StridedShard(dim=0, sf=2), Shard(dim=0))"
    weight = block(out, ":compare model[0].weight")[0]
    assert weight == f"no replicas to compare; shards differ along dp, tp by design {shards}"
    later = after_step(out)
    assert (
        block(later, ":compare table")[1]
        == "rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)"
    )
    bias = "rank 3 (dp 1, tp 1) differs from its tp replica rank 2 (dp 1, tp 0)"
    assert block(later, ":compare model[2].bias")[1] == bias
    assert block(later, ":ddp-check")[1:3] == [
        f"parameter 2.bias: {bias}",
        "parameters: 1 of 4 differ from their replicas",
    ]
