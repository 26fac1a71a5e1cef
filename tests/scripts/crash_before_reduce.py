"""Rank 1 raises before an all_reduce that rank 0 waits in."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.barrier()
if rank == 1:
    raise ValueError("rank 1 broke")
dist.all_reduce(torch.ones(3))
