"""A 2x2 (dp, tp) mesh: tensor parallel inside each dp replica, FSDP2 across them; one step."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = parallelize_module(model, mesh["tp"], {"0": ColwiseParallel(), "2": RowwiseParallel()})
fully_shard(model, mesh=mesh["dp"])
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8) * (mesh.get_coordinate()[0] + 1)
breakpoint()
loss = model(x).sum()  # @forward
loss.backward()  # @backward
optim.step()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
