"""FSDP2 (`fully_shard`) on a small MLP: one training step on every rank, gloo on the CPU.

Stops before the step and after it. `fsdp2_step.py hsdp` (4 ranks): hybrid sharding on a 2x2
(replicate, shard) mesh, so every parameter is Replicate() along `replicate`; after the step rank 3
nudges its shard of `model[0].weight`.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

hsdp = sys.argv[1:] == ["hsdp"]
dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("replicate", "shard")) if hsdp else None
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
for layer in (model[0], model[2]):
    fully_shard(layer, mesh=mesh)
fully_shard(model, mesh=mesh)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8) * (dist.get_rank() + 1)
breakpoint()
loss = model(x).sum()
loss.backward()
optim.step()
if hsdp and dist.get_rank() == 3:
    with torch.no_grad():
        model[0].weight._local_tensor.add_(0.5)
breakpoint()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
