"""FSDP2 (`fully_shard`) on a module of the user's own, three training steps, gloo on the CPU.

No breakpoint in the code: the tests set one in `Block.forward` with `--break`. Stopped there,
`self.outer`'s parameters are FSDP2's unsharded ones, whose storage FSDP2 frees (resizes to 0
bytes) once the forward is done.
"""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard


class Block(torch.nn.Module):
    """Two linear layers, the inner one sharded on its own."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(8, 16)
        self.outer = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.inner(x))  # @forward
        return self.outer(h)


dist.init_process_group("gloo")
torch.manual_seed(0)
model = Block()
fully_shard(model.inner)
fully_shard(model)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8) * (dist.get_rank() + 1)
for step in range(3):  # noqa: B007 (`p step` at a breakpoint reads it)
    loss = model(x).sum()
    loss.backward()
    optim.step()
    optim.zero_grad()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
