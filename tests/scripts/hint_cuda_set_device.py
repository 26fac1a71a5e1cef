"""A GPU script on a CPU-only torch: `torch.cuda.set_device(LOCAL_RANK)` before anything else."""

import os

import torch

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
