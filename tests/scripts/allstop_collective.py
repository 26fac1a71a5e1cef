"""Rank 2 stops at a breakpoint at step 3, before the all_reduce the other ranks enter."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
total = torch.zeros(1)
for step in range(5):
    if rank == 2 and step == 3:
        breakpoint()
    tensor = torch.ones(1)
    dist.all_reduce(tensor)
    total += tensor
print(f"rank {rank} total {total.item()}")
