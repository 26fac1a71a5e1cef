"""Runs for ever, mostly inside a library's Python code: `spins.py` stops at a breakpoint first,
`spins.py --run` does not."""

import sys
import textwrap

i = 0
if "--run" not in sys.argv:
    breakpoint()
print("spinning")
while True:
    i += 1
    textwrap.dedent("  x\n  y\n")
