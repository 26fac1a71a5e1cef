"""Two gloo ranks for `ddptui attach`: rank 0 waits in all_reduce while rank 1 sleeps, or with
`spin`, stays busy in Python. Rank 0 also starts a child, which inherits RANK but is no rank.

Started by plain torchrun, never by ddptui. `# @name` marks lines the tests look up.
"""

import itertools
import subprocess
import sys
import time

import torch
import torch.distributed as dist


def spin() -> None:
    """Busy in Python for ten minutes, all on one line: a sample of a `while` loop lands on its
    condition or on its body."""
    deadline = time.monotonic() + 600
    all(time.monotonic() < deadline for _ in itertools.repeat(None))  # @spin


def main() -> None:
    """One all_reduce together, then rank 1 goes elsewhere instead of joining the second."""
    dist.init_process_group("gloo")
    dist.all_reduce(torch.ones(3))
    rank = dist.get_rank()
    if rank == 0:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print(f"rank {rank} in place", flush=True)
    if rank == 1 and sys.argv[1:] == ["spin"]:
        spin()  # @call_spin
    elif rank == 1:
        time.sleep(600)  # @sleep
    dist.all_reduce(torch.ones(3))  # @hang


main()
