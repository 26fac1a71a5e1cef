"""Plain Python (no torch): each rank stops at breakpoint() before a call to step into."""

import os


def scaled(x):
    y = x * 2
    return y


rank = int(os.environ["RANK"])
breakpoint()
z = scaled(rank)
print(f"rank {rank} z {z}")
