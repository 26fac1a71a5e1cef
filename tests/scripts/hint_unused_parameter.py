"""DDP over a module with a parameter its forward never uses: the second backward fails."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


class Net(torch.nn.Module):
    """Two layers, one unused."""

    def __init__(self) -> None:
        super().__init__()
        self.used = torch.nn.Linear(2, 2)
        self.unused = torch.nn.Linear(2, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Only `used` takes part."""
        return self.used(x)  # type: ignore[no-any-return]


dist.init_process_group("gloo")
model = DistributedDataParallel(Net())
for _ in range(2):
    model(torch.ones(1, 2)).sum().backward()
