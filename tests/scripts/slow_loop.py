"""Plain Python (no torch): a loop that stops at a breakpoint() every step, and never ends."""

import itertools
import time

for step in itertools.count():
    breakpoint()  # @step
    time.sleep(0.05)
