"""A watchdog process that ends every rank if ddptui itself dies, even by SIGKILL.

`python -m ddptui.core.transport.reaper STATE_DIR`, in a session of its own; ddptui writes one `PID
START_TIME` line per rank to its stdin. When stdin reaches EOF (ddptui exited, however), it ends
the session's processes — the listed ranks still alive with the same start time, their
descendants, and every process carrying STATE_DIR in its environment (a double-forked escapee
went to init when ddptui died) — then removes the `pymp-*` folders the ranks listed and
STATE_DIR. Nothing else is ever signalled.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import sys

import psutil

from ddptui.core.transport.ending import kill_all, remove_tempdirs, session_processes


def rank_process(line: str) -> psutil.Process | None:
    """The process a `PID START_TIME` line names, if it is still that process."""
    pid, _, started = line.strip().partition(" ")
    with contextlib.suppress(ValueError, psutil.Error):
        process = psutil.Process(int(pid))
        if abs(process.create_time() - float(started)) < 0.01:
            return process
    return None


def main() -> None:
    """Read ranks until EOF, then clean up after ddptui."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    state_dir = sys.argv[1]
    ranks = [p for p in map(rank_process, sys.stdin) if p is not None]
    kill_all(lambda: session_processes(ranks, state_dir, everyone=True))
    remove_tempdirs(state_dir)
    shutil.rmtree(state_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
