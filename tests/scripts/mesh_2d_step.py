"""A 2x2 (dp, tp) mesh: tensor parallel inside each dp replica, FSDP2 across them; one step.

`table` is replicated across dp and sharded across tp; `per_dp` is replicated on each dp replica's
own tp mesh (`mesh["tp"]`), different across them. Stops before the step and after it.
`mesh_2d_step.py odd`: after the step rank 3 nudges its shard of `table` and its replica of
`model[2].bias` (Replicate() along tp).
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor, Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
fully_shard(model, mesh=mesh["dp"])
optim = torch.optim.SGD(model.parameters(), lr=0.1)
table = distribute_tensor(torch.arange(32.0).reshape(8, 4), mesh, [Replicate(), Shard(0)])
dp = mesh.get_coordinate()[0]
per_dp = DTensor.from_local(torch.ones(2) * dp, mesh["tp"], [Replicate()], run_check=False)
x = torch.ones(2, 8) * (dp + 1)
breakpoint()
loss = model(x).sum()
loss.backward()
optim.step()
if sys.argv[1:] == ["odd"] and dist.get_rank() == 3:
    with torch.no_grad():
        table._local_tensor.add_(1)
        model[2].bias._local_tensor.add_(0.5)
breakpoint()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
