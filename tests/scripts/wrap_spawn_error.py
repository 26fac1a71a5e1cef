"""An mp.spawn job whose rank 1 raises NameError after init_process_group (used by test_wrap)."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def work(rank: int, world_size: int, port: str) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group("gloo", rank=rank, world_size=world_size)
    value = torch.tensor([float(rank)])
    if rank == 1:
        value += undefined_name  # noqa: F821
    dist.all_reduce(value)
    dist.destroy_process_group()


if __name__ == "__main__":
    mp.spawn(work, args=(2, sys.argv[1]), nprocs=2)
