"""A small DistributedDataParallel training job that stops at breakpoint() before its first forward pass.

Run it under ddptui:  ddptui --nproc-per-node 4 examples/train_ddp.py
(or, without ddptui:  torchrun --nproc-per-node 2 examples/train_ddp.py — and see why ddptui exists).
"""

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(steps: int = 3) -> None:
    backend = "nccl" if torch.cuda.is_available() else "gloo"
    dist.init_process_group(backend=backend, init_method="env://")
    rank = dist.get_rank()
    device = torch.device(f"cuda:{int(os.environ['LOCAL_RANK'])}" if backend == "nccl" else "cpu")
    torch.manual_seed(0)  # same initial weights on every rank (DDP also broadcasts them)
    model = DDP(torch.nn.Linear(10, 1).to(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    generator = torch.Generator().manual_seed(rank)  # each rank sees its own data shard
    for step in range(steps):
        x = torch.randn(20, 10, generator=generator).to(device)
        y = torch.randn(20, 1, generator=generator).to(device)
        if step == 0:
            breakpoint()
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()  # DDP all-reduces the gradients here: every rank must take this step
        optimizer.step()
        optimizer.zero_grad()
        print(f"rank {rank} step {step} loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
