"""CPU use of rank process trees: what the stall watch samples to tell idle ranks from busy ones."""

from __future__ import annotations

import contextlib
import os

import psutil

ACTIVE = (psutil.STATUS_RUNNING, psutil.STATUS_DISK_SLEEP)
"""Process states that mean busy (runnable, or waiting for the disk), not blocked."""
ACTIVE_STATES = (b"R", b"D")
"""The same, as `/proc/PID/stat` writes them."""
PROC_SELF = "/proc/self/stat"
"""There where the table can be read from /proc (Linux); psutil reads it elsewhere."""


class ProcessTable:
    """One pass over every process: parent links, CPU seconds, activity, start time.

    Per-rank `children(recursive=True)` reads the whole table once per rank, a cost that grows
    with the square of the job's size every sample. One pass serves every rank.
    """

    def __init__(self) -> None:
        self.children: dict[int, list[int]] = {}
        self.info: dict[int, tuple[float, bool, float]] = {}
        """Each process's CPU seconds, whether it is active, and its start time."""
        if os.path.exists(PROC_SELF):
            self._read_proc()
            return
        for process in psutil.process_iter(["ppid", "cpu_times", "status", "create_time"]):
            got = process.info
            if got["cpu_times"] is None or got["status"] is None:
                continue
            cpu = got["cpu_times"].user + got["cpu_times"].system
            self.info[process.pid] = (cpu, got["status"] in ACTIVE, got["create_time"] or 0.0)
            self.children.setdefault(got["ppid"], []).append(process.pid)

    def _read_proc(self) -> None:
        """The table from `/proc/PID/stat`, one read a process: psutil's `process_iter` makes an
        object, runs checks and does several reads a process, and the table is read every half
        second while ranks run or wait."""
        tick, boot = float(os.sysconf("SC_CLK_TCK")), psutil.boot_time()
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    data = stat.read()
                # after the command's name, which may hold spaces and parentheses: field 3 on
                fields = data[data.rindex(b")") + 2 :].split()
                state, ppid = fields[0], int(fields[1])
                cpu = (int(fields[11]) + int(fields[12])) / tick  # utime, stime
                started = boot + int(fields[19]) / tick  # starttime, as psutil's create_time
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile, or not readable
            self.info[int(name)] = (cpu, state in ACTIVE_STATES, started)
            self.children.setdefault(ppid, []).append(int(name))

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
