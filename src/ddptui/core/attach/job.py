"""The job `ddptui attach PID` looks at: its rank processes, found from PID's process tree.

The ranks are the processes under PID (a torchrun agent; or, when PID is a rank, under whatever
started it) whose environment has `RANK`, one job's worth (same `TORCHELASTIC_RUN_ID`,
`MASTER_ADDR`, `MASTER_PORT`); a rank's own children (DataLoader workers) inherit `RANK` and are
left out.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

import psutil

from ddptui.core.model.text import one_line

_JOB_ENV = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")


class AttachError(Exception):
    """PID names no job that can be attached to; the message is one line."""


@dataclass(frozen=True)
class RankProcess:
    """One rank of the attached job, as its environment describes it."""

    rank: int
    local_rank: int | None
    world_size: int | None
    pid: int
    host: str
    job: tuple[str, ...] = field(compare=False)
    """What the ranks of one job share in their environment (`_JOB_ENV`)."""
    process: psutil.Process = field(compare=False, repr=False)

    @classmethod
    def of(cls, process: psutil.Process) -> RankProcess | None:
        """The rank `process` is, None when its environment has no RANK; psutil errors propagate."""
        env = process.environ()
        rank = _int(env.get("RANK"))
        if rank is None:
            return None
        job = tuple(env.get(name, "") for name in _JOB_ENV)
        local, world = _int(env.get("LOCAL_RANK")), _int(env.get("WORLD_SIZE"))
        return cls(rank, local, world, process.pid, socket.gethostname(), job, process)


@dataclass(frozen=True)
class Job:
    """The ranks found under `root`, sorted by global rank."""

    root: psutil.Process
    key: tuple[str, ...]
    ranks: tuple[RankProcess, ...]
    other_jobs: int = 0

    @property
    def world_size(self) -> int:
        """The world size the ranks were given (0 when none says)."""
        return max((r.world_size or 0 for r in self.ranks), default=0)

    @property
    def missing(self) -> list[int]:
        """Ranks the world size promises that were not found here (another host, or gone)."""
        return sorted(set(range(self.world_size)) - {r.rank for r in self.ranks})


def find_job(pid: int) -> Job:
    """The job PID is, or runs: its rank processes. Raise AttachError when there are none."""
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            raise psutil.ZombieProcess(pid)
        try:
            itself = RankProcess.of(process)
        except psutil.AccessDenied:
            itself = None
        if itself is None:
            return job_under(process)
        return job_under(_launcher(itself), itself.job)
    except psutil.ZombieProcess:
        raise AttachError(_zombie(pid)) from None
    except psutil.NoSuchProcess:
        raise AttachError(f"no such process: {pid}") from None


def _zombie(pid: int) -> str:
    """What to say of a process that exited and is not reaped yet: its status is all that is left."""
    try:
        parent = f"its parent {psutil.Process(pid).ppid()}"
    except psutil.Error:
        parent = "its parent"
    return f"pid {pid} is a zombie (exited, not yet reaped by {parent})"


def _launcher(rank: RankProcess) -> psutil.Process:
    """The nearest ancestor of a rank outside its job: torchrun's agent, a shell, init."""
    for parent in rank.process.parents():
        try:
            other = RankProcess.of(parent)
        except psutil.AccessDenied:
            return parent
        if other is None or other.job != rank.job:
            return parent
    return rank.process


def job_under(root: psutil.Process, key: tuple[str, ...] | None = None) -> Job:
    """The ranks among `root` and its descendants: of job `key`, or of the first job found."""
    found, denied = _rank_processes(root)
    jobs: dict[tuple[str, ...], list[RankProcess]] = {}
    for rank in found:
        jobs.setdefault(rank.job, []).append(rank)
    if key is None and jobs:
        key = min(jobs, key=lambda k: min(r.pid for r in jobs[k]))
    if key not in jobs:
        raise AttachError(_nothing_found(root, denied))
    ranks = tuple(sorted(jobs[key], key=lambda r: (r.rank, r.pid)))
    return Job(root, key, ranks, len(jobs) - 1)


def _rank_processes(root: psutil.Process) -> tuple[list[RankProcess], int]:
    """The ranks among `root` and its descendants, not their own children (DataLoader workers
    inherit RANK); and how many environments could not be read.
    """
    found: dict[int, RankProcess] = {}
    denied = 0
    for process in [root, *root.children(recursive=True)]:
        try:
            if process.status() != psutil.STATUS_ZOMBIE and (rank := RankProcess.of(process)):
                found[rank.pid] = rank
        except psutil.AccessDenied:
            denied += 1
        except psutil.NoSuchProcess:
            continue
    return [rank for rank in found.values() if not _forked_from_rank(rank, found)], denied


def _forked_from_rank(rank: RankProcess, found: dict[int, RankProcess]) -> bool:
    """True for a rank's child: an ancestor is the same rank of the same job."""
    try:
        parents = rank.process.parents()
    except psutil.Error:
        return False
    others = [found[parent.pid] for parent in parents if parent.pid in found]
    return any(other.rank == rank.rank and other.job == rank.job for other in others)


def _nothing_found(root: psutil.Process, denied: int) -> str:
    """Why no rank was found under `root`, in one line."""
    text = f"neither pid {root.pid} ({describe_process(root)}) nor a child of it has RANK in its environment"
    if denied:
        text += f"; {denied} could not be read (another user's? attach as that user)"
    return text


def _int(text: str | None) -> int | None:
    """`text` as a non-negative int, None when it is not one."""
    return int(text) if text is not None and text.strip().isdigit() else None


def describe_process(process: psutil.Process) -> str:
    """A process's command line, without the interpreter, shortened, on one line (newlines shown
    as `\\n`): `torchrun --nproc-per-node 2 …`."""
    try:
        argv = process.cmdline() or [process.name()]
    except psutil.Error:
        return "?"
    if len(argv) > 1 and os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    text = one_line(" ".join([os.path.basename(argv[0]), *argv[1:]]))
    return text if len(text) <= 60 else text[:59] + "…"
