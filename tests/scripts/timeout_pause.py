"""Rank 0 stops before an all_reduce that rank 1 enters: rank 1 waits there past the job's 5 s timeout.

`--subgroup` runs the all_reduce on a `new_group` of its own with a 4 s timeout instead. Each rank
prints how long it spent in the all_reduce.
"""

import sys
import time
from datetime import timedelta

import torch
import torch.distributed as dist

dist.init_process_group("gloo", init_method="env://", timeout=timedelta(seconds=5))
rank = dist.get_rank()
group = dist.new_group([0, 1], timeout=timedelta(seconds=4)) if "--subgroup" in sys.argv else None
value = torch.tensor([float(rank + 1)])
if rank == 0:
    breakpoint()
start = time.monotonic()
dist.all_reduce(value, group=group)
print(f"rank {rank} sum {value.item():g} after {time.monotonic() - start:.0f} s")
dist.destroy_process_group()
