"""Every kind of tensor a job may hold, summarised as `:compare` would, one JSON line each.

Run as a one-rank gloo job (argv[1] = a free port). A summary that crashed the process would end
the output early; each line carries the CPU seconds its summary took.
"""

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.placement_types import _StridedShard
from torch.testing._internal.two_tensor import TwoTensor

from ddptui.rank.summary import summarize

os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[1])
dist.init_process_group("gloo", rank=0, world_size=1)
mesh = init_device_mesh("cpu", (1,), mesh_dim_names=("tp",))


class Plain(torch.Tensor):
    """A subclass with no behaviour of its own."""


class Loud(torch.Tensor):
    """A subclass whose every torch call raises."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        raise RuntimeError("Loud refuses")


class BadRepr:
    """An object whose repr raises."""

    def __repr__(self) -> str:
        raise ValueError("no repr for you")


class HugeRepr:
    """An object whose repr is 100 MB."""

    def __repr__(self) -> str:
        return "y" * 100_000_000


def freed() -> torch.Tensor:
    """A tensor whose storage was resized to nothing, as FSDP2 frees unsharded parameters."""
    tensor = torch.ones(16)
    tensor.untyped_storage().resize_(0)
    return tensor


def fake() -> torch.Tensor:
    """A FakeTensor: shapes without data."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode() as mode:
        return mode.from_tensor(torch.ones(3))


pending = funcol.all_reduce(torch.ones(4), "sum", mesh)
done = funcol.all_reduce(torch.ones(4), "sum", mesh)
done.trigger_wait()  # what any use of the result does
ZOO = {
    "dtensor_shard": lambda: distribute_tensor(torch.arange(8.0), mesh, [Shard(0)]),
    "dtensor_replicate": lambda: distribute_tensor(torch.ones(4), mesh, [Replicate()]),
    "dtensor_partial": lambda: DTensor.from_local(torch.ones(4), mesh, [Partial()]),
    "dtensor_strided": lambda: DTensor.from_local(torch.ones(4), mesh, [_StridedShard(0, split_factor=2)]),
    "async_collective_pending": lambda: pending,
    "async_collective_done": lambda: done,
    "dtensor_of_pending": lambda: DTensor.from_local(funcol.all_reduce(torch.ones(2), "sum", mesh), mesh),
    "meta": lambda: torch.empty(5, device="meta"),
    "fake": fake,
    "sparse_coo": lambda: torch.eye(3).to_sparse(),
    "sparse_csr": lambda: torch.eye(3).to_sparse_csr(),
    "nested": lambda: torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]),
    "quantized": lambda: torch.quantize_per_tensor(torch.ones(4), 0.1, 0, torch.quint8),
    "bfloat16": lambda: torch.ones(4, dtype=torch.bfloat16),
    "float8": lambda: torch.ones(4).to(torch.float8_e4m3fn),
    "complex": lambda: torch.ones(4, dtype=torch.complex64),
    "bool": lambda: torch.tensor([True, False]),
    "zero_size": lambda: torch.ones(0, 3),
    "view_transposed": lambda: torch.arange(12.0).reshape(3, 4).t(),
    "view_strided": lambda: torch.arange(20.0)[::3],
    "huge_1e8": lambda: torch.zeros(100_000_000),
    "requires_grad": lambda: torch.ones(3, requires_grad=True) * 2,
    "parameter": lambda: torch.nn.Parameter(torch.ones(3)),
    "subclass_plain": lambda: torch.ones(3).as_subclass(Plain),
    "subclass_raising": lambda: torch.ones(3).as_subclass(Loud),
    "subclass_wrapper": lambda: TwoTensor(torch.ones(2), torch.zeros(2)),
    "storage_freed": freed,
    "list_of_pending": lambda: [pending, torch.ones(1)],
    "repr_raises": BadRepr,
    "repr_100mb": HugeRepr,
}
for name, make in ZOO.items():
    value = make()
    start = time.process_time()  # CPU seconds: the bound holds however loaded the machine is
    summary = summarize(value)
    seconds = time.process_time() - start
    print(json.dumps({"name": name, "seconds": seconds, "summary": summary}), flush=True)
print(json.dumps({"name": "end", "pending_completed": pending.completed}), flush=True)
pending.wait()
dist.destroy_process_group()
