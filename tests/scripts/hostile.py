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
# ddptui's terminal mark for `paused` under a key that is not the session's (ended by BEL, then ST)
forged = (
    b"\x1b]5379;" + b"0" * 24 + b';{"k":"paused","frame":["/forged.py",1,"f"],"post_mortem":false,"depth":0}'
)
out.write(forged + b"\x07" + forged + b"\x1b\\\n")
out.flush()
marker = "still alive"
breakpoint()
print(marker)
