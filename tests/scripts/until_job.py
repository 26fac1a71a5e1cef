"""A gloo job for `:until-collective`: `python until_job.py SCENARIO`; every rank stops at breakpoint().

consistent: both ranks all_reduce a [3] tensor, then barrier, then finish.
mismatch:   rank r all_reduces a [3 + r] tensor.
exit:       rank 1 finishes without any collective; rank 0 all_reduces.
hidden:     rank 0 broadcasts; rank 1 enters that broadcast from C++ (`_broadcast_coalesced`, as
            DDP does), where no stop can see it.
early:      rank 1 all_reduces through a reference taken at import (`from torch.distributed import
            all_reduce`), rank 0 through `dist.all_reduce`.
ring:       the ranks swap tensors with `batch_isend_irecv` (a send, then a receive, each), its
            `P2POp`s made before ddptui armed anything.
`# @name` marks lines the tests look up.
"""

import sys

import torch
import torch.distributed as dist
from torch.distributed import all_reduce as early_all_reduce

scenario = sys.argv[1]
dist.init_process_group("gloo")
rank = dist.get_rank()
tensor = torch.ones(3 + rank if scenario == "mismatch" else 3)
received = torch.zeros(3)
ring = (
    [dist.P2POp(dist.isend, tensor, 1 - rank), dist.P2POp(dist.irecv, received, 1 - rank)]
    if scenario == "ring"
    else []
)
breakpoint()  # @start
tensor = tensor * 2
if scenario == "exit" and rank == 1:
    sys.exit(0)  # @exit
if scenario == "hidden" and rank == 1:
    dist._broadcast_coalesced(dist.group.WORLD, [tensor], 1 << 20, 0)  # @hidden
elif scenario == "hidden":
    dist.broadcast(tensor, 0)  # @broadcast
elif scenario == "early" and rank == 1:
    early_all_reduce(tensor)  # @early
elif scenario == "ring":
    [work.wait() for work in dist.batch_isend_irecv(ring)]  # @ring
else:
    dist.all_reduce(tensor)  # @all_reduce
total = float(tensor.sum())  # @after
dist.barrier()  # @barrier
print(f"rank {rank} total {total}")
dist.destroy_process_group()
