"""A 4x4 (dp, tp) device mesh over 16 ranks, no model: every rank pauses, dp 3 at a line of its own."""

import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (4, 4), mesh_dim_names=("dp", "tp"))
if mesh.get_coordinate()[0] == 3:
    breakpoint()
    replica = "the last"
else:
    breakpoint()
    replica = "another"
dist.barrier()
dist.destroy_process_group()
