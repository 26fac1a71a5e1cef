"""2x2 (dp, tp) mesh: rank 3 passes [5] where rank 2 passes [4] to the tp all_reduce."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh

dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
rank = dist.get_rank()
tp = mesh.get_group("tp")
dist.all_reduce(torch.ones(4), group=tp)
dist.barrier()
x = torch.ones(5 if rank == 3 else 4)
dist.all_reduce(x, group=tp)
dist.barrier()
dist.destroy_process_group()
