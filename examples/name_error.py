"""One rank takes a branch with a bug (a NameError) while the others go on to a collective.

ddptui names the crashed rank, its innermost error and line, opens post-mortem there, and reports
the other ranks as waiting in the all_reduce they can no longer finish.
"""

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo", init_method="env://")
rank = dist.get_rank()
total = torch.tensor([1.0])
if rank == dist.get_world_size() - 1:
    total = total * c  # noqa: F821 (the bug)
dist.all_reduce(total)
print(f"rank {rank} total {total.item()}")
dist.destroy_process_group()
