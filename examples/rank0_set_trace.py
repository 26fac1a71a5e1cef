"""The classic `if rank == 0: pdb.set_trace()` pattern: rank 0 stops, the others wait in all_reduce.

Under plain torchrun the other ranks sit silently in the collective; ddptui reports them as
`waiting at rank0_set_trace.py:NN in all_reduce` and stepping rank 0 over the all_reduce frees them.
"""

import torch
import torch.distributed as dist

dist.init_process_group(backend="gloo", init_method="env://")
rank = dist.get_rank()
value = torch.tensor([float(rank + 1)])
if rank == 0:
    import pdb

    pdb.set_trace()
dist.all_reduce(value)
print(f"rank {rank} sum {value.item()}")
dist.destroy_process_group()
