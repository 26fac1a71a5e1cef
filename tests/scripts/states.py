"""A rank in one of the states requests must be answered in: at a prompt, blocked in a collective,
in a busy Python loop, or in post-mortem. `python states.py MODE FLAG`; FLAG releases the wait."""

import os
import sys
import time

import torch
import torch.distributed as dist

mode, flag = sys.argv[1], sys.argv[2]
dist.init_process_group("gloo")
rank = dist.get_rank()
secret = f"rank {rank} secret"
tensor = torch.arange(3.0) + rank


def spin() -> int:
    """Busy Python code until the flag appears."""
    count = 0
    while not os.path.exists(flag):
        count += 1
    return count


if mode == "prompt":
    breakpoint()
elif mode == "collective":
    if rank == 1:
        while not os.path.exists(flag):
            time.sleep(0.05)
    dist.all_reduce(tensor)
elif mode == "busy":
    spin()
elif mode == "crash":
    raise ValueError(secret)
dist.destroy_process_group()
