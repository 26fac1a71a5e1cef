"""ddptui's demo: a 4-rank DistributedDataParallel job on the CPU (gloo) that stops at a breakpoint.

Try, in broadcast mode: `n` (F10) a few times, over `loss.backward()` where DDP all-reduces the
gradients (F7 runs every rank there and says what each will all-reduce); then `p loss`: each rank's
own value side by side; `p model.module[0].weight.grad.norm()`: they agree after the all-reduce;
`c` (F5) lets training finish.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

COLOURS = ["\x1b[32m", "\x1b[36m", "\x1b[35m", "\x1b[33m"]


def progress(rank: int, step: int, steps: int) -> None:
    """A tqdm-like progress bar redrawn with carriage returns."""
    done = int(20 * (step + 1) / steps)
    bar = "█" * done + "·" * (20 - done)
    sys.stdout.write(f"\r{COLOURS[rank % 4]}rank {rank}\x1b[0m |{bar}| {step + 1}/{steps}")
    sys.stdout.flush()


def main(steps: int = 5) -> None:
    """Train a tiny model for a few steps, stopping once before the first forward pass."""
    dist.init_process_group(backend="gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1000 + rank)
    print(f"{COLOURS[rank % 4]}rank {rank}/{dist.get_world_size()}\x1b[0m pid {os.getpid()} ready")
    for step in range(steps):
        x = torch.randn(32, 8, generator=data)
        y = x.sum(dim=1, keepdim=True)
        if step == 0:
            breakpoint()
        out = model(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        progress(rank, step, steps)
        time.sleep(0.05)
    print(f"\nrank {rank} final loss {loss.item():.4f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
