"""Every rank loops without a collective; rank 2 stops at a breakpoint at step 3 (`--crash`: it
raises there instead, into post-mortem). The others finish after about 6 s unless stopped."""

import sys
import time

import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
for step in range(200):
    if rank == 2 and step == 3:
        if "--crash" in sys.argv:
            raise ValueError("boom at step 3")
        breakpoint()
    time.sleep(0.03)
print(f"rank {rank} finished")
