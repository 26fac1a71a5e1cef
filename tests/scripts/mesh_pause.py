"""A 2x2 (dp, tp) device mesh and a pair group outside it, then a breakpoint on every rank."""

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
rank = dist.get_rank()
pair = dist.new_group([0, 3])
breakpoint()
dist.barrier()
dist.destroy_process_group()
