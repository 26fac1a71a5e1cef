"""torch.distributed.breakpoint(rank=1): ranks 0 and 2 wait in its barrier; once rank 1 goes on,
they wait for it in an all_reduce while it stops again at a second breakpoint."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
dist.breakpoint(rank=1)
if rank == 1:
    breakpoint()
dist.all_reduce(torch.ones(1))
dist.destroy_process_group()
