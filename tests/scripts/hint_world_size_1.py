"""Hard-codes a world of 1 rank: started with 2, rank 1 is outside it while rank 0 trains alone."""

import os
import time
from datetime import timedelta

import torch
import torch.distributed as dist

# A short timeout so the failure shows in seconds (the default is 30 minutes).
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=1, timeout=timedelta(seconds=3))
for _ in range(300):  # training for 30 s: long enough for the rank outside the world to fail
    dist.all_reduce(torch.ones(1))
    time.sleep(0.1)
