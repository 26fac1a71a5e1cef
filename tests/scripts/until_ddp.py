"""A 2-rank gloo DDP job for `:until-collective`: `python until_ddp.py SCENARIO`; breakpoint() first.

train:  both ranks step a DDP model; `loss.backward()` is where DDP all-reduces the gradients.
branch: rank 1 all-reduces its loss (a metric only it logs) before backward: the ranks stand
        before different collectives, the hang DDP newcomers meet.
nosync: a first backward under `no_sync()` (no all-reduce), then a synchronised one.
`# @name` marks lines the tests look up.
"""

import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

scenario = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(4, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.ones(3, 4) * (rank + 1)
breakpoint()  # @start
if scenario == "nosync":
    with model.no_sync():
        model(x).sum().backward()  # @nosync
loss = model(x).sum()
if scenario == "branch" and rank == 1:
    dist.all_reduce(loss.detach().clone())  # @metric
loss.backward()  # @backward
optimizer.step()  # @step
print(f"rank {rank} weight {float(model.module.weight.detach().sum()):.4f}")
dist.destroy_process_group()
