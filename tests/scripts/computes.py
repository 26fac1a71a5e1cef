"""Two gloo ranks compute (CPU-bound Python) for SECONDS, then agree in an all_reduce and exit."""

import sys
import time

import torch
import torch.distributed as dist

seconds = float(sys.argv[1])
dist.init_process_group("gloo")
end = time.monotonic() + seconds
total = 0
while time.monotonic() < end:
    total += sum(range(1000))
value = torch.ones(1)
dist.all_reduce(value)
print("rank", dist.get_rank(), "sum", value.item())
