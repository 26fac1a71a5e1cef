"""Plain Python (no torch): each rank stops at breakpoint() beside a list an evaluation may change,
then counts a few steps; `evaluations.py [SECONDS]` lingers that long before it prints the list."""

import os
import sys
import time

rank = int(os.environ["RANK"])
log: list[str] = []
step = 0
breakpoint()
while step < 5:
    step += 1
log.append("program")
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
print(f"rank {rank} log {log}")
