"""Four ranks build the same nn.Linear without a seed (weights differ), plus values that agree,
one that is NaN on rank 1, and one that raises on rank 2; then take a few steps."""

import math
import os

import torch

rank = int(os.environ["RANK"])
layer = torch.nn.Linear(4, 2)
same = torch.arange(6.0).reshape(2, 3)
loss = float("nan") if rank == 1 else 0.5 + rank / 1000
lookup = {} if rank == 2 else {"key": rank}
close = 1.0 + rank * 1e-9
counter = 0
breakpoint()
counter += 1
counter += 1
print("rank", rank, "done", math.isnan(loss))
