"""Prints terminal queries (device attributes, cursor position) right before a breakpoint."""

import sys

sys.stdout.write("asking \x1b[c\x1b[6n\x1b[>c\x1b[5n done\n")
sys.stdout.flush()
breakpoint()
step = 1
print("stepped", step)
