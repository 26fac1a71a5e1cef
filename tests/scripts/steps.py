"""Plain Python (no torch): each rank stops at breakpoint() and steps through a few lines."""

import os

rank = int(os.environ["RANK"])
value = rank * 10
breakpoint()
value += 1
value += 2
print(f"rank {rank} value {value}")
