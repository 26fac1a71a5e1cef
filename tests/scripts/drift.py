"""4 ranks train a DDP model on gloo; after its step 3, rank 3 adds to its weight outside DDP
(nothing syncs it back), so from step 4 its replica differs. A breakpoint() starts every step."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = DistributedDataParallel(torch.nn.Linear(4, 1))
weight = model.module.weight
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for step in range(8):
    breakpoint()  # @step
    loss = model(torch.ones(2, 4) * (rank + 1)).sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if rank == 3 and step == 3:
        with torch.no_grad():
            weight.add_(1e-3)  # @drift
dist.destroy_process_group()
