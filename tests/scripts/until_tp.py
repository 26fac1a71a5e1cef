"""Tensor parallel (Colwise then Rowwise) on a small MLP, one training step, gloo on the CPU.

`python until_tp.py grad`: the input requires grad too, so backward all-reduces its gradient.
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
x = torch.ones(2, 8, requires_grad=sys.argv[1:] == ["grad"])
breakpoint()
out = model(x)  # @forward
loss = out.sum()  # @loss
loss.backward()  # @backward
optim.step()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
