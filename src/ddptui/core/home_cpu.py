"""One CPU for ddptui's own work while its pump drains the ranks' terminals.

The app's event loop and the pty pump (`ddptui.core.pump`) hand bytes to each other all the time a
rank prints; placed by the scheduler, each takes a CPU of its own and preempts the ranks on a
small machine. On one CPU they take turns and leave the other CPUs to the job. bench/ui_flood.py,
one rank printing 8 MiB on 2 CPUs, median of 10 alternating runs: the rank drained in 0.27 s with
both placed freely, 0.23 s with both on one CPU, 0.27 s with either one alone pinned.

The event loop's thread is pinned before the pump and the watchdog start (they inherit the CPU:
they are ddptui's), and gets its set of CPUs back when the last job that pinned it ends. The job's
processes get that set back before they exec (`restore_in_child`, which their spawn runs), so a
rank, and whatever it starts, runs where it would have without ddptui. Nothing is pinned where
ddptui may use one CPU only, or where there is no `sched_setaffinity` (not Linux).
"""

from __future__ import annotations

import contextlib
import os
import threading

_cpus: set[int] | None = None
"""The CPUs the pinned thread had (and the ranks get), while it is pinned."""
_cpu: int | None = None
"""The CPU it is pinned to."""
_thread = 0
"""The pinned thread's id (the kernel's: it is unpinned from whichever thread releases the job)."""
_holders = 0
"""Jobs that pinned it and have not ended."""


def pin(ranks: int) -> int | None:
    """Keep the calling thread on the last of its CPUs, when a job of `ranks` local ranks leaves
    one free, until every `pin` is matched by `unpin`; that CPU, or None when nothing was pinned
    (the ranks need every CPU, their count is not known (0), or there is no way to pin)."""
    global _cpus, _cpu, _thread, _holders
    if _holders:
        _holders += 1
        return _cpu
    try:
        cpus = os.sched_getaffinity(0)
        if not 0 < ranks < len(cpus):
            return None
        cpu = max(cpus)
        os.sched_setaffinity(0, {cpu})
    except (AttributeError, OSError):
        return None
    _cpus, _cpu, _thread, _holders = cpus, cpu, threading.get_native_id(), 1
    return cpu


def unpin() -> None:
    """Match one `pin`; the last gives the pinned thread its CPUs back (from any thread)."""
    global _cpus, _cpu, _holders
    if not _holders:
        return
    _holders -= 1
    if not _holders and _cpus is not None:
        with contextlib.suppress(OSError):  # the thread is gone
            os.sched_setaffinity(_thread, _cpus)
        _cpus = _cpu = None


def restore_in_child() -> None:
    """In a child of the pinned thread, before it execs a rank: the CPUs ddptui was given."""
    if _cpus is not None:
        with contextlib.suppress(OSError):
            os.sched_setaffinity(0, _cpus)
