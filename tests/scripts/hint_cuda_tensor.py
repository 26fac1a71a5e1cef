"""A GPU script on a CPU-only torch: the model is moved to the rank's GPU."""

import os

import torch

model = torch.nn.Linear(2, 2).to(f"cuda:{os.environ['LOCAL_RANK']}")
