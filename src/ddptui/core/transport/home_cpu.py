"""One CPU for ddptui's own work while its pump drains the ranks' terminals.

The app's event loop and the pty pump (`ddptui.core.transport.pump`) hand bytes to each other all the time a
rank prints. Placed by the scheduler, each takes a CPU of its own and preempts the ranks there; on
one CPU they take turns, the scheduler moves the ranks to the others, and the loop waits less for a
CPU: a lone flooding rank drains sooner and keys reach the screen sooner while ranks print, and
eight flooding ranks drain a little slower (`bench/ui_flood.py` times all three, pinned).

The event loop's thread is pinned before the pump starts (which inherits the CPU), and gets its set
of CPUs back when the last job that pinned it ends (what it starts meanwhile shares the CPU:
py-spy, asyncio's executor threads, which scan /proc; they are ddptui's too, and their Python ran one
at a time with the loop's under the GIL anyway). The job's processes get that set back before they
exec (`restore_in_child`, which their spawn runs), so a rank, and whatever it starts, runs where it
would have without ddptui. Nothing is pinned where ddptui may use one CPU only, or where there is
no `sched_setaffinity` (not Linux).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

_cpus: set[int] | None = None
"""The CPUs the pinned thread had (and the ranks get), while it is pinned."""
_cpu: int | None = None
"""The CPU it is pinned to."""
_thread = 0
"""The pinned thread's id (the kernel's: it is unpinned from whichever thread releases the job)."""
_holders = 0
"""Jobs that pinned it and have not ended."""


def capacity(cpu: int) -> int:
    """How fast the kernel says `cpu` is: its scheduler capacity (1024 for the biggest), else its
    top clock; 0 where it says neither (a VM, most servers: all alike)."""
    base = Path(f"/sys/devices/system/cpu/cpu{cpu}")
    for name in ("cpu_capacity", "cpufreq/cpuinfo_max_freq"):
        with contextlib.suppress(OSError, ValueError):
            return int((base / name).read_text())
    return 0


def choose(cpus: set[int], speed: Callable[[int], int] = capacity) -> int:
    """The last of the fastest of `cpus` (a laptop's efficiency cores come after its performance
    cores, and are slower: the UI is one Python thread)."""
    return max(cpus, key=lambda cpu: (speed(cpu), cpu))


def pin() -> int | None:
    """Keep the calling thread on one of its CPUs (`choose`) until every `pin` is matched by
    `unpin`; that CPU, or None when nothing was pinned (one CPU to use, or no way to pin)."""
    global _cpus, _cpu, _thread, _holders
    if _holders:
        _holders += 1
        return _cpu
    try:
        cpus = os.sched_getaffinity(0)
        if len(cpus) < 2:
            return None
        cpu = choose(cpus)
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
