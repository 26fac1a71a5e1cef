"""A two-stage pipeline (torch.distributed.pipelining, GPipe schedule), two microbatches, gloo.

From /tmp/par/pipeline_2stage.py, with one step before the breakpoint too: stopped there, the
ranks have sends and receives to show.
"""

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
stage_module = torch.nn.Linear(8, 8)
stage = PipelineStage(stage_module, rank, 2, torch.device("cpu"))
schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=lambda out, target: out.sum())
x = torch.ones(4, 8)


def step() -> None:
    """One training step: stage 0 feeds the input, stage 1 computes the loss."""
    if rank == 0:
        schedule.step(x)
    else:
        losses: list[torch.Tensor] = []
        schedule.step(target=torch.zeros(4, 8), losses=losses)
        print(f"rank {rank} losses {[round(v.item(), 4) for v in losses]}")


step()
breakpoint()
step()
dist.destroy_process_group()
