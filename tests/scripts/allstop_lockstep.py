"""Every rank stops at a breakpoint() in each of three steps with an all_reduce; then rank 2
alone stops at a breakpoint in a loop the others run without a collective."""

import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for _ in range(3):
    breakpoint()
    tensor = torch.ones(1)
    dist.all_reduce(tensor)
for step in range(200):
    if rank == 2 and step == 3:
        breakpoint()
    time.sleep(0.03)
print(f"rank {rank} finished")
