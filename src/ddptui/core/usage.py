"""CPU use of rank process trees: what the stall watch samples to tell idle ranks from busy ones."""

from __future__ import annotations

import contextlib

import psutil

ACTIVE = (psutil.STATUS_RUNNING, psutil.STATUS_DISK_SLEEP)
"""Process states that mean busy (runnable, or waiting for the disk), not blocked."""


class ProcessTable:
    """One pass over every process: parent links, CPU seconds, activity, start time.

    Per-rank `children(recursive=True)` reads the whole table once per rank: at 256 ranks that
    was 1.5 s of CPU every sample. One pass serves every rank.
    """

    def __init__(self) -> None:
        self.children: dict[int, list[int]] = {}
        self.info: dict[int, tuple[float, bool, float]] = {}
        for process in psutil.process_iter(["ppid", "cpu_times", "status", "create_time"]):
            got = process.info
            if got["cpu_times"] is None or got["status"] is None:
                continue
            cpu = got["cpu_times"].user + got["cpu_times"].system
            self.info[process.pid] = (cpu, got["status"] in ACTIVE, got["create_time"] or 0.0)
            self.children.setdefault(got["ppid"], []).append(process.pid)

    def usage(self, process: psutil.Process) -> tuple[float, bool] | None:
        """CPU seconds of `process` and its descendants, and whether any is active; None if gone."""
        root = self.info.get(process.pid)
        if root is None or abs(root[2] - process.create_time()) > 0.01:
            return None
        cpu, active = 0.0, False
        todo = [process.pid]
        while todo:
            pid = todo.pop()
            if pid in self.info:
                cpu += self.info[pid][0]
                active = active or self.info[pid][1]
                todo += self.children.get(pid, ())
        return cpu, active


def tree_usage(process: psutil.Process) -> tuple[float, bool] | None:
    """CPU seconds of a process and its descendants, and whether any is running or in disk wait."""
    cpu, active = 0.0, False
    try:
        tree = [process, *process.children(recursive=True)]
    except psutil.Error:
        return None
    for member in tree:
        with contextlib.suppress(psutil.Error), member.oneshot():
            times = member.cpu_times()
            cpu += times.user + times.system
            active = active or member.status() in (psutil.STATUS_RUNNING, psutil.STATUS_DISK_SLEEP)
    return cpu, active
