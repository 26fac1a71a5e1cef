"""Tensor parallel (Colwise then Rowwise) on a small MLP, one training step, gloo on the CPU.

Stops before the step and after it. `tp_step.py odd`: after the step rank 1 nudges its replica of
`model[2].bias` (Replicate() along tp) and its replica of that bias's gradient.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8)
breakpoint()
out = model(x)
loss = out.sum()
loss.backward()
optim.step()
if sys.argv[1:] == ["odd"] and dist.get_rank() == 1:
    with torch.no_grad():
        model[2].bias._local_tensor.add_(0.5)
        model[2].bias.grad._local_tensor.mul_(2)
breakpoint()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
