"""Every rank stops; on `c` every rank but 0 hits a bug at once, while rank 0 works on for two
seconds before it stops again (plain Python, no torch)."""

import os
import time

rank = int(os.environ["RANK"])
breakpoint()
if rank > 0:
    value = undefined_name  # noqa: F821 (the bug)
time.sleep(2)
breakpoint()
