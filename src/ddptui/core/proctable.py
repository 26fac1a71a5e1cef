"""One read of /proc: every live process's parent, session and CPU time (standard library only)."""

from __future__ import annotations

import os
from typing import NamedTuple

TICKS = os.sysconf("SC_CLK_TCK")


class Proc(NamedTuple):
    """What ddptui needs to know of a process."""

    ppid: int
    sid: int
    cpu: float
    """User + system CPU seconds."""
    active: bool
    """Running, runnable or in disk wait right now (R or D): not blocked, even if starved of CPU."""


def scan() -> dict[int, Proc]:
    """Every live (not zombie) process, by pid."""
    table: dict[int, Proc] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != b"Z":
            cpu = (int(fields[11]) + int(fields[12])) / TICKS
            table[int(name)] = Proc(int(fields[1]), int(fields[3]), cpu, fields[0] in (b"R", b"D"))
    return table


def children_of(table: dict[int, Proc]) -> dict[int, list[int]]:
    """Each process's children."""
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    return children


def descendants(
    table: dict[int, Proc], roots: set[int], children: dict[int, list[int]] | None = None
) -> set[int]:
    """`roots` (those alive) and every process below them."""
    children = children_of(table) if children is None else children
    found = roots & table.keys()
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def tree_usage(table: dict[int, Proc], roots: set[int]) -> dict[int, tuple[float, bool]]:
    """For each root: CPU seconds used by it and its descendants, and whether any is active now."""
    children = children_of(table)
    usage = {}
    for root in roots:
        tree = [table[pid] for pid in descendants(table, {root}, children)]
        usage[root] = (sum(proc.cpu for proc in tree), any(proc.active for proc in tree))
    return usage
