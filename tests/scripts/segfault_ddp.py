"""Dies of SIGSEGV building DistributedDataParallel with TORCH_DISTRIBUTED_DEBUG=DETAIL (torch 2.13 CPU).

Run as one rank (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT set); the crash is inside
`DistributedDataParallel.__init__`, called from line 13.
"""

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel

dist.init_process_group("gloo")
print("process group ready", flush=True)
model = DistributedDataParallel(torch.nn.Linear(2, 2))
print("DDP built: this torch build does not segfault here", flush=True)
dist.destroy_process_group()
