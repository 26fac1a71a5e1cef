"""An mp.spawn job like PyTorch's DDP tutorial (multigpu.py) on CPU/gloo: breakpoint() in each worker."""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def ddp_setup(rank: int, world_size: int, port: str) -> None:
    os.environ["MASTER_ADDR"] = "localhost"
    os.environ["MASTER_PORT"] = port
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)


def main(rank: int, world_size: int, port: str) -> None:
    ddp_setup(rank, world_size, port)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    breakpoint()
    loss = model(torch.ones(2, 4)).sum()
    loss.backward()
    print(f"rank {rank} grad {model.module.weight.grad.sum().item():.1f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = 2
    port = sys.argv[1] if len(sys.argv) > 1 else "29533"
    mp.spawn(main, args=(world_size, port), nprocs=world_size)
