"""PyTorch's DDP tutorial (multigpu.py) on CPU: the script starts its own ranks with mp.spawn.

Run it under ddptui as you would run it:  ddptui -- python examples/spawn_ddp.py
Each worker stops at breakpoint() once DDP is built; every worker gets a pane of its own.
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP


def ddp_setup(rank: int, world_size: int) -> None:
    os.environ.setdefault("MASTER_ADDR", "localhost")
    os.environ.setdefault("MASTER_PORT", "12355")
    dist.init_process_group(backend="gloo", rank=rank, world_size=world_size)


def main(rank: int, world_size: int, steps: int) -> None:
    ddp_setup(rank, world_size)
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(10, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)
    for step in range(steps):
        x, y = torch.randn(20, 10, generator=generator), torch.randn(20, 1, generator=generator)
        if step == 0:
            breakpoint()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank} step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    world_size = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    mp.spawn(main, args=(world_size, 3), nprocs=world_size)
