"""FSDP2 (`fully_shard`) on a small MLP: one training step on every rank, gloo on the CPU."""

import torch
import torch.distributed as dist
from torch.distributed.fsdp import fully_shard

dist.init_process_group("gloo")
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
for layer in (model[0], model[2]):
    fully_shard(layer)
fully_shard(model)
optim = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(2, 8) * (dist.get_rank() + 1)
breakpoint()
loss = model(x).sum()  # @forward
loss.backward()  # @backward
optim.step()
print(f"rank {dist.get_rank()} loss {loss.item():.4f}")
dist.destroy_process_group()
