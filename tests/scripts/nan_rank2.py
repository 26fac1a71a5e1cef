"""A 4-rank DDP job (gloo, CPU) that never calls the debugger: rank 2's loss turns NaN at step 3.

Tests find the loss line by its comment and break on the line after it, where `loss` is defined
(`--break nan_rank2.py:LINE,loss.isnan().any()` stops rank 2 only, at step 3).
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


def main(steps: int = 5) -> None:
    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DDP(torch.nn.Linear(4, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    for step in range(steps):
        x = torch.randn(8, 4, generator=generator)
        if rank == 2 and step == 3:
            x[0, 0] = float("nan")
        out = model(x)
        loss = out.pow(2).mean()  # the loss line
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    print(f"rank {rank} done after {steps} steps")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
