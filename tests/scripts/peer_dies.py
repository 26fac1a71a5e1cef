"""Rank 1 leaves while rank 0 enters an all_reduce: rank 0 fails with gloo's bracketed error text."""

import os
import sys

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
print("hostile:", "[/] [bold]bold[/bold] [@click=app.quit]click[/] [red]")
breakpoint()
if rank == 1:
    os._exit(0)  # gone without a word: its peer's collective fails with "Connection closed by peer"
dist.all_reduce(torch.ones(3))
sys.exit(0)
