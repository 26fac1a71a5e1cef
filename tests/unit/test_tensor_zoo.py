"""Inspection never hurts the job: every kind of tensor gets a summary or says why not."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import SCRIPTS

from ddptui.core.diagnosis.compare import describe
from ddptui.core.transport.launch import free_port


@pytest.fixture(scope="module")
def zoo() -> dict[str, Any]:
    """Summaries of the zoo, by name, from one real one-rank gloo job."""
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, str(SCRIPTS / "tensor_zoo.py"), str(free_port("127.0.0.1"))],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {line["name"]: line for line in lines}


def info(zoo: dict[str, Any], name: str) -> dict[str, Any]:
    """The `tensor` entry of one summary."""
    return dict(zoo[name]["summary"]["tensor"])


def test_the_job_lives_and_every_summary_is_bounded(zoo: dict[str, Any]) -> None:
    assert "end" in zoo and len(zoo) == 31
    for name, line in zoo.items():
        if name != "end":
            assert line["seconds"] < 10, name
            assert len(line["summary"]["repr"]) < 2100, name


def test_a_pending_collective_is_described_and_never_waited_on(zoo: dict[str, Any]) -> None:
    assert zoo["end"]["pending_completed"] is False
    pending = info(zoo, "async_collective_pending")
    assert pending["shape"] == [4] and pending["hash"] is None
    assert "pending collective" in pending["note"]
    assert "pending collective" in zoo["async_collective_pending"]["summary"]["repr"]
    assert "pending collective" in zoo["list_of_pending"]["summary"]["repr"]
    assert "pending collective" in describe(zoo["async_collective_pending"]["summary"])
    assert info(zoo, "async_collective_done")["mean"] == 1.0
    assert "pending collective" in info(zoo, "dtensor_of_pending")["note"]


def test_dtensors_show_their_placements_mesh_and_local_shard(zoo: dict[str, Any]) -> None:
    shard = info(zoo, "dtensor_shard")
    assert shard["local"] and shard["shape"] == [8] and shard["max"] == 7.0
    mesh_id = shard["dtensor"].pop("mesh_id")
    assert shard["dtensor"] == {
        "global_shape": [8],
        "placements": ["Shard(dim=0)"],
        "kinds": ["shard"],
        "mesh": {"tp": 1},
        "coordinate": [0],
    }
    assert len(mesh_id) == 16 and info(zoo, "dtensor_replicate")["dtensor"]["mesh_id"] == mesh_id
    assert info(zoo, "dtensor_replicate")["dtensor"]["placements"] == ["Replicate()"]
    assert info(zoo, "dtensor_replicate")["dtensor"]["kinds"] == ["replicate"]
    assert "Partial" in info(zoo, "dtensor_partial")["dtensor"]["placements"][0]
    assert info(zoo, "dtensor_partial")["dtensor"]["kinds"] == ["partial"]


def test_a_dtensor_of_a_pending_collective_still_says_where_it_lies(zoo: dict[str, Any]) -> None:
    pending = info(zoo, "dtensor_of_pending")
    assert pending["dtensor"]["coordinate"] == [0] and pending["dtensor"]["kinds"] == ["replicate"]


def test_fsdp2s_strided_shard_is_a_shard(zoo: dict[str, Any]) -> None:
    strided = info(zoo, "dtensor_strided")["dtensor"]
    assert strided["placements"] == ["_StridedShard(dim=0, sf=2)"] and strided["kinds"] == ["shard"]
    assert "local shard" in describe(zoo["dtensor_shard"]["summary"])


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("meta", "meta"),
        ("fake", "FakeTensor"),
        ("sparse_coo", "sparse_coo"),
        ("sparse_csr", "sparse_csr"),
        ("nested", "nested"),
        ("subclass_wrapper", "TwoTensor"),
        ("storage_freed", "storage freed"),
    ],
)
def test_tensors_without_plain_data_say_why(zoo: dict[str, Any], name: str, why: str) -> None:
    assert why in info(zoo, name)["note"]
    assert info(zoo, name)["hash"] is None


@pytest.mark.parametrize(
    ("name", "mean"),
    [
        ("quantized", 1.0),
        ("bfloat16", 1.0),
        ("float8", 1.0),
        ("bool", 0.5),
        ("view_transposed", 5.5),
        ("view_strided", 9.0),
        ("huge_1e8", 0.0),
        ("requires_grad", 2.0),
        ("parameter", 1.0),
        ("subclass_plain", 1.0),
        ("subclass_raising", 1.0),
    ],
)
def test_tensors_with_data_get_stats_and_a_hash(zoo: dict[str, Any], name: str, mean: float) -> None:
    assert info(zoo, name)["mean"] == mean
    assert info(zoo, name)["hash"]


def test_odd_values_still_get_a_summary(zoo: dict[str, Any]) -> None:
    assert info(zoo, "complex")["norm"] == 2.0 and info(zoo, "complex")["hash"]
    assert info(zoo, "zero_size")["shape"] == [0, 3] and info(zoo, "zero_size")["nan"] == 0
    assert "no repr for you" in zoo["repr_raises"]["summary"]["repr"]
    assert "[cut, 100000000 chars]" in zoo["repr_100mb"]["summary"]["repr"]
