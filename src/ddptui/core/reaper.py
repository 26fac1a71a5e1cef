"""A watchdog process that ends every rank if ddptui itself dies, even by SIGKILL.

ddptui starts it in a session of its own and writes `pid N` / `dir PATH` lines to its stdin. When
stdin reaches EOF (ddptui exited, however), it kills the ranks' sessions and process trees and
removes the session directory. Standard library only: it reads /proc.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time

from ddptui.core import proctable
from ddptui.core.proctable import descendants


def doomed(leaders: set[int]) -> set[int]:
    """The ranks, everything in their sessions, and all their descendants."""
    table = proctable.scan()
    found = descendants(table, {pid for pid, proc in table.items() if proc.sid in leaders} | leaders)
    found.discard(os.getpid())
    return found


def kill_all(leaders: set[int]) -> None:
    """SIGKILL the rank trees until none is left (bounded: a few seconds at most)."""
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        victims = doomed(leaders)
        if not victims:
            return
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.05)


def main() -> None:
    """Read pids and dirs until EOF, then clean up after ddptui."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    leaders: set[int] = set()
    dirs: list[str] = []
    for line in sys.stdin:
        kind, _, value = line.strip().partition(" ")
        if kind == "pid" and value.isdigit():
            leaders.add(int(value))
        elif kind == "dir":
            dirs.append(value)
    kill_all(leaders)
    for path in dirs:
        shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
    main()
