"""An unseeded nn.Linear on every rank (different weights), then wrapped in DDP (rank 0's weights
are broadcast at construction): `:compare layer.weight` shows 4 groups, then one."""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("gloo")
layer = torch.nn.Linear(4, 2)
breakpoint()
model = DDP(layer)
breakpoint()
dist.destroy_process_group()
