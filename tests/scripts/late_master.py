"""Rank 0 computes (CPU-bound Python) for SECONDS before it joins the rendezvous; the other ranks
reach `init_process_group` first and retry the store's connect with torch's growing backoff."""

import os
import sys
import time

import torch
import torch.distributed as dist

if os.environ["RANK"] == "0":
    end = time.monotonic() + float(sys.argv[1])
    while time.monotonic() < end:
        sum(range(1000))
joined = time.monotonic()
dist.init_process_group("gloo")
value = torch.ones(1)
dist.all_reduce(value)
print("rank", dist.get_rank(), "sum", value.item(), "joined in", round(time.monotonic() - joined, 1), "s")
