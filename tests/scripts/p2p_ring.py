"""Three ranks in a ring, each waiting on the work of an irecv from the rank before it: a deadlock
of three, none of them sending."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.zeros(2, 3)
work = dist.irecv(t, src=(rank - 1) % world)
work.wait()
dist.send(t, dst=(rank + 1) % world)
dist.destroy_process_group()
