"""A healthy job that mostly sleeps: an all_reduce every 50 ms for PACED_SECONDS (default 12).

The ranks agree when to stop through the all_reduce itself (the minimum of their `go` flags), so
every rank runs the same number of steps.
"""

import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
end = time.monotonic() + float(os.environ.get("PACED_SECONDS", "12"))
steps = 0
go = torch.ones(1)
while go.item():
    go = torch.tensor([float(time.monotonic() < end)])
    dist.all_reduce(go, op=dist.ReduceOp.MIN)
    steps += 1
    time.sleep(0.05)
print(f"rank {dist.get_rank()} did {steps} steps")
dist.destroy_process_group()
