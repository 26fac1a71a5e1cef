"""Runs for ever, a line at a time: `spins.py` stops at a breakpoint first, `spins.py --run` does not."""

import sys
import time

i = 0
if "--run" not in sys.argv:
    breakpoint()
print("spinning")
while True:
    i += 1
    time.sleep(0.001)
