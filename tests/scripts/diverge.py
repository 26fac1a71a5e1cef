"""Plain Python: rank 0 stops at one line, the others at another; the last rank then crashes."""

import os
import sys

rank = int(os.environ["RANK"])
world = int(os.environ["WORLD_SIZE"])
if rank == 0:
    breakpoint()
    here = "rank 0 line"
else:
    breakpoint()
    here = "other line"
if rank == world - 1:
    raise ValueError(f"rank {rank} is unhappy")
print(os.get_terminal_size(sys.stdout.fileno()))
