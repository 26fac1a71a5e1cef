"""An `srun` task (SLURM starts one process per rank, no torchrun): rank and world size come from
SLURM's variables, and it stops at breakpoint() before init_process_group (used by test_listen)."""

import os

import torch
import torch.distributed as dist

rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
address = f"tcp://127.0.0.1:{os.environ['PORT']}"
breakpoint()
dist.init_process_group("gloo", init_method=address, rank=rank, world_size=world)
value = torch.tensor([float(rank + 1)])
dist.all_reduce(value)
print(f"task {rank} sum {value.item()}")
dist.destroy_process_group()
