"""DDP replicas that drift: `ddp_checks.py SCENARIO` on 2 gloo ranks, stopping at breakpoints.

unused:  a submodule the forward never uses (no gradient after backward)
nudged:  a parameter changed on rank 1 after DDP construction
grads:   gradients that differ across ranks (a hook scales rank 1's)
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP


class Net(torch.nn.Module):
    """Two layers; `unused` takes part only when asked."""

    def __init__(self) -> None:
        super().__init__()
        self.used = torch.nn.Linear(3, 2)
        self.unused = torch.nn.Linear(3, 2)
        self.register_buffer("steps", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Only `used` takes part."""
        return self.used(x)


scenario = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)  # different on purpose: DDP broadcasts rank 0's weights at construction
model = DDP(Net(), find_unused_parameters=scenario != "unused")
if scenario == "nudged" and rank == 1:
    with torch.no_grad():
        model.module.used.bias += 0.5
model(torch.ones(4, 3)).sum().backward()
if scenario == "grads" and rank == 1:
    model.module.used.weight.grad *= 2  # after the all-reduce: the replicas' gradients now differ
breakpoint()
if scenario == "unused":
    model(torch.ones(4, 3)).sum().backward()  # DDP's error: the unused parameters are named
dist.destroy_process_group()
