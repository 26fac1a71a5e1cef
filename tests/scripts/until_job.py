"""A gloo job for `:until-collective`: `python until_job.py SCENARIO`; every rank stops at breakpoint().

consistent: both ranks all_reduce a [3] tensor, then barrier, then finish.
mismatch:   rank r all_reduces a [3 + r] tensor.
exit:       rank 1 finishes without any collective; rank 0 all_reduces.
hidden:     rank 1 enters the all_reduce through a reference taken before ddptui could wrap it.
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
breakpoint()  # @start
tensor = tensor * 2
if scenario == "exit" and rank == 1:
    sys.exit(0)  # @exit
if scenario == "hidden" and rank == 1:
    early_all_reduce(tensor)  # @hidden
else:
    dist.all_reduce(tensor)  # @all_reduce
total = float(tensor.sum())  # @after
dist.barrier()  # @barrier
print(f"rank {rank} total {total}")
dist.destroy_process_group()
