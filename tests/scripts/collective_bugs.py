"""The collective bugs of DDP, one per scenario: `collective_bugs.py SCENARIO` on 2 (or 4) gloo ranks.

skip:     rank 1 skips the third all_reduce of a loop, then sleeps (the others wait in it)
deadlock: rank 0 waits in an all_reduce, rank 1 in a barrier
mismatch: all_reduce of [3] on rank 0 and [4] on rank 1 (both may even exit 0)
early:    rank 1 exits 0 early; the others wait in a collective it never enters
crash:    rank 2 raises NameError; the others then fail in gloo
"""

import os
import sys
import time

import torch
import torch.distributed as dist

scenario = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
if scenario == "skip":
    for step in range(5):
        if rank == 1 and step == 2:
            time.sleep(600)
        dist.all_reduce(torch.ones(3))
elif scenario == "deadlock":
    dist.all_reduce(torch.ones(3))
    if rank == 0:
        dist.all_reduce(torch.ones(3))
    else:
        dist.barrier()
elif scenario == "mismatch":
    try:
        dist.all_reduce(torch.ones(3 + rank))
    except RuntimeError as exc:
        print("rank", rank, "got", type(exc).__name__)
elif scenario == "early":
    dist.all_reduce(torch.ones(3))
    if rank == 1:
        os._exit(0)
    dist.all_reduce(torch.ones(3))
elif scenario == "crash":
    dist.all_reduce(torch.ones(3))
    if rank == 2:
        time.sleep(0.5)
        print(undefined_name)  # noqa: F821
    dist.all_reduce(torch.ones(3))
dist.destroy_process_group()
