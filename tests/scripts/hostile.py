"""Writes garbage and hostile terminal sequences to its terminal, then stops at a breakpoint."""

import os
import random
import sys

rng = random.Random(int(os.environ["RANK"]))
out = sys.stdout.buffer
out.write(bytes(rng.randrange(256) for _ in range(4096)))
out.write(
    b"\x1b[?1049h\x1b[2J\x1b]0;title\x07\x1b[?25l\x1bP1$r\x1b\\\x1b[999;999H\x1b[?2004h\xff\xfe(Pdb r0) \r\n"
)
out.write(b"\x1b[?1049l\x1b[0m\n")
out.flush()
marker = "still alive"
breakpoint()
print(marker)
