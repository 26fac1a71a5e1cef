"""A launcher whose two workers both say they are rank 0 of 1 (used by test_restarts).

The first links and stops at breakpoint(); the second starts once the first is linked, and ends
before the first goes on: its claim is on a rank whose process is alive. `python wrap_twice.py
DIR`: the workers leave `first` and `second` in DIR.
"""

import os
import subprocess
import sys
import time
from pathlib import Path


def wait_for(path: Path) -> None:
    """Wait (at most 60 s) until `path` exists."""
    deadline = time.monotonic() + 60
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)


if sys.argv[1] == "--worker":
    here, me = Path(sys.argv[2]), sys.argv[3]
    (here / me).write_text(str(os.getpid()))  # linked by now: sitecustomize connected at start-up
    breakpoint()
    if me == "first":
        wait_for(here / "second-done")  # the first stays alive until the second has run its course
    print(f"the {me} worker ran to its end")
    if me == "second":
        (here / "second-done").touch()
    sys.exit(0)

here = Path(sys.argv[1])
env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
first = subprocess.Popen([sys.executable, __file__, "--worker", str(here), "first"], env=env)
wait_for(here / "first")
second = subprocess.Popen([sys.executable, __file__, "--worker", str(here), "second"], env=env)
sys.exit(second.wait() or first.wait())
