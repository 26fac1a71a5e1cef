"""Rank 0 computes (CPU-bound Python) for SECONDS before it joins the rendezvous; the other ranks
reach `init_process_group` first and retry the store's connect with torch's growing backoff.

`late_master.py SECONDS` is a torchrun-style script (env://); `late_master.py SECONDS PORT` starts
its two ranks itself with `mp.spawn`, each setting MASTER_ADDR/PORT as PyTorch's DDP tutorial does.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def main(rank: int, seconds: float, port: str) -> None:
    if port:
        os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "localhost", port
    if rank == 0:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            sum(range(1000))
    joined = time.monotonic()
    dist.init_process_group("gloo", rank=rank, world_size=2)
    value = torch.ones(1)
    dist.all_reduce(value)
    print("rank", rank, "sum", value.item(), "joined in", round(time.monotonic() - joined, 1), "s")


if __name__ == "__main__":
    seconds, port = float(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else ""
    if port:
        mp.spawn(main, args=(seconds, port), nprocs=2)
    else:
        main(int(os.environ["RANK"]), seconds, "")
