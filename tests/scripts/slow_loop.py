"""Plain Python (no torch): a loop that stops at a breakpoint() every step and never ends; with
an argument N, rank 1 raises at step N (and opens post-mortem)."""

import itertools
import os
import sys
import time

crash_at = int(sys.argv[1]) if len(sys.argv) > 1 else -1
rank = int(os.environ["RANK"])
for step in itertools.count():
    breakpoint()  # @step
    time.sleep(0.05)
    if rank == 1 and step == crash_at:
        raise ValueError(f"rank 1 gives up at step {step}")
