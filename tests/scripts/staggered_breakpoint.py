"""Plain Python: rank R reaches its breakpoint() 0.6*R s after rank 0, busy in the user's code
until then (as many ranks on few cores reach the same breakpoint seconds apart)."""

import os
import time

rank = int(os.environ["RANK"])
until = time.monotonic() + 0.6 * rank
while time.monotonic() < until:
    pass
breakpoint()
print(f"rank {rank} past the breakpoint")
