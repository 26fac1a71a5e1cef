"""Four gloo ranks for `:stacks`: ranks 0-2 wait in the third all_reduce while rank 3 sleeps.

`# @name` marks lines the tests look up.
"""

import time

import torch
import torch.distributed as dist


def main() -> None:
    """Two all_reduces together, then rank 3 goes to sleep instead of joining the third."""
    dist.init_process_group("gloo")
    for _ in range(2):
        dist.all_reduce(torch.ones(3))
    if dist.get_rank() == 3:
        time.sleep(600)  # @sleep
    dist.all_reduce(torch.ones(3))  # @hang


main()
