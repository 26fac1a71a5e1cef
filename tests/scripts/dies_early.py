"""Rank 1 exits with status 3 before any prompt; rank 0 would stop at a breakpoint."""

import os
import sys

if os.environ["RANK"] == "1":
    sys.stdout.write("rank 1 giving up\n")
    os._exit(3)
breakpoint()
