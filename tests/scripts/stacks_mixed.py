"""Four plain-Python ranks in four states for `:stacks`: rank 0 paused at a breakpoint, rank 1
asleep, rank 2 exited, rank 3 in one C call that holds the GIL (it cannot answer; a dump can).

`# @name` marks lines the tests look up.
"""

import os
import time

RANK = int(os.environ["RANK"])


def nap() -> None:
    """Sleep (the GIL released)."""
    time.sleep(600)  # @nap


def hog() -> None:
    """Hold the GIL for minutes: `sum` over a range runs in C without letting go of it."""
    time.sleep(1)  # the link is up and the test has seen it
    sum(range(10**12))  # @hog


if RANK == 0:
    breakpoint()  # @breakpoint
elif RANK == 1:
    nap()
elif RANK == 3:
    hog()  # @hog_call
