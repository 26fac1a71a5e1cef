"""A two-stage pipeline (torch.distributed.pipelining, GPipe schedule) of a module of the user's
own, three steps, gloo. No breakpoint in the code: the tests set one in `Stage.forward`; stage 0
reaches it first, while stage 1 waits in the schedule for stage 0's activations."""

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, ScheduleGPipe


class Stage(torch.nn.Module):
    """One linear layer and a ReLU."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)  # @forward
        return torch.relu(y)


dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(rank)
stage = PipelineStage(Stage(), rank, 2, torch.device("cpu"))
schedule = ScheduleGPipe(stage, n_microbatches=2, loss_fn=lambda out, target: out.sum())
x = torch.ones(4, 8)
for step in range(3):
    if rank == 0:
        schedule.step(x)
    else:
        losses: list[torch.Tensor] = []
        schedule.step(target=torch.zeros(4, 8), losses=losses)  # @last
        print(f"rank {rank} step {step} losses {[round(v.item(), 4) for v in losses]}")
dist.destroy_process_group()
