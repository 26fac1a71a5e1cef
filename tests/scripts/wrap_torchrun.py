"""A torchrun job: every rank stops at breakpoint(), then all_reduces its rank (used by test_wrap)."""

import os  # noqa: F401  (the tests print os.environ at the prompt)

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
breakpoint()
value = torch.tensor([float(rank)])
dist.all_reduce(value)
print(f"rank {rank} sum {value.item()}")
dist.destroy_process_group()
