"""Two ranks each block in recv from the other."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
t = torch.zeros(3)
dist.recv(t, src=1 - rank)
dist.send(t, dst=1 - rank)
dist.destroy_process_group()
