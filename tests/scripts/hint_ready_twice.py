"""DDP and reentrant activation checkpointing of a module run twice: a parameter is marked ready
twice in one backward."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.checkpoint import checkpoint

dist.init_process_group("gloo")


class Twice(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = checkpoint(self.layer, x, use_reentrant=True)
        return checkpoint(self.layer, x, use_reentrant=True)


model = DDP(Twice(), find_unused_parameters=True)
model(torch.randn(2, 4, requires_grad=True)).sum().backward()
