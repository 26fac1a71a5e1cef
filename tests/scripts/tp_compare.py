"""Tensor parallel on 2 ranks: RowwiseParallel leaves the output as a pending AsyncCollectiveTensor.

`:compare out` must describe it, never read its memory (data_ptr() is 0) nor wait on it.
"""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
model = parallelize_module(model, mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
out = model(torch.ones(2, 8))
weight = model[0].weight
breakpoint()
total = float(out.sum())
dist.destroy_process_group()
