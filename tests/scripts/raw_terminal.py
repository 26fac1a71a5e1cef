"""Plain Python (no torch): each rank leaves its terminal raw (as a key-reading program may),
then stops at breakpoint() and steps; at the end it says whether its terminal is raw again."""

import os
import termios
import tty

rank = int(os.environ["RANK"])
tty.setraw(0)
value = rank * 10
breakpoint()
value += 1
raw = not termios.tcgetattr(0)[3] & termios.ICANON
print(f"rank {rank} value {value} {'raw' if raw else 'cooked'}")
