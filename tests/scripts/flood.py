"""Prints LINES numbered lines of 100 characters (50 MB by default) between two breakpoints."""

import os
import sys

lines = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
breakpoint()
pad = "x" * 86
out = sys.stdout
for number in range(lines):
    out.write(f"line {number:08d} {pad}\n")
out.flush()
breakpoint()
print("rank", os.environ["RANK"], "done")
