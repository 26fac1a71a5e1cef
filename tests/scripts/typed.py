"""Plain Python (no torch): stops at breakpoint(); the next line waits until FLAG exists
(`python typed.py FLAG`, used by test_protocol for commands typed into a pane)."""

import os
import sys
import time


def wait(path: str) -> None:
    """Return once `path` exists."""
    while not os.path.exists(path):
        time.sleep(0.02)


flag = sys.argv[1]
breakpoint()
wait(flag)
print("released")
