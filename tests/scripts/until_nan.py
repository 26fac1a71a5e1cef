"""4 ranks train a tiny model on gloo; rank 2's input holds a NaN from step 3, so its loss turns
NaN there (before the gradients' all_reduce spreads it). A breakpoint() in the loop stops every step."""

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
model = torch.nn.Linear(4, 1)
for step in range(8):
    x = torch.ones(8, 4) * (step + 1)
    if rank == 2 and step >= 3:
        x[0, 0] = float("nan")
    loss = model(x).pow(2).mean()
    breakpoint()  # @step
    loss.backward()
    for param in model.parameters():
        dist.all_reduce(param.grad)
        param.grad = None
dist.destroy_process_group()
