"""Tensor parallel (Colwise then Rowwise) on a module of the user's own, three training steps,
gloo. No breakpoint in the code: the tests set one in `MLP.forward`, on one rank only, so the
other runs on into the Rowwise layer's all-reduce (a functional collective) and waits there."""

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(torch.nn.Module):
    """Up and down again."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(8, 16)
        self.down = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.up(x))  # @forward
        return self.down(h)  # @down


dist.init_process_group("gloo")
mesh = init_device_mesh("cpu", (dist.get_world_size(),), mesh_dim_names=("tp",))
torch.manual_seed(0)
model = parallelize_module(MLP(), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8)
for step in range(3):  # noqa: B007 (`p step` at a breakpoint reads it)
    loss = model(x).sum()
    loss.backward()
    optim.step()
    optim.zero_grad()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
