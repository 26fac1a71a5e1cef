"""Hard-codes a world of 2 ranks: started with 1, rank 0 waits for a second rank that never comes."""

import os
from datetime import timedelta

import torch.distributed as dist

# A short timeout so the failure shows in seconds (the default is 30 minutes).
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2, timeout=timedelta(seconds=3))
dist.barrier()
