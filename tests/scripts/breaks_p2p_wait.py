"""Rank 0 stops at a breakpoint before it sends; rank 1 meanwhile waits on the work of an irecv
from it (`work.wait()`, as pipeline schedules wait), then prints what it got."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
t = torch.zeros(3)
if dist.get_rank() == 0:
    breakpoint()
    dist.send(t + 1, dst=1)  # @send
else:
    work = dist.irecv(t, src=0)
    work.wait()  # @wait
    print(f"rank 1 got {t.tolist()}")
dist.destroy_process_group()
