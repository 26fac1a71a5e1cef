"""`ddptui attach PID`: a job ddptui did not start, read-only: its ranks, their states and stacks.

The ranks are the processes under PID (a torchrun agent; or, when PID is a rank, under whatever
started it) whose environment has `RANK`, one job's worth (same `TORCHELASTIC_RUN_ID`,
`MASTER_ADDR`, `MASTER_PORT`); a rank's own children (DataLoader workers) inherit `RANK` and are
left out. Stacks come from `py-spy dump --nonblocking`: the ranks' memory is read while they run,
so they are never paused, signalled or stopped, at the price of a torn stack now and then on a
rank that is busy (a rank waiting in a collective stands still, so its stack is exact). Without
ddptui's rank side there is no collective log: the verdict comes from the stacks alone.

This module is the command; finding the ranks is `attach_job`, reading a stack `py_spy`, one look
at every rank `attach_look`, and what is printed from a look `attach_report`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from collections.abc import Sequence
from typing import NoReturn

import psutil

from ddptui.core.attach.job import AttachError, Job, describe_process, find_job, job_under
from ddptui.core.attach.look import look
from ddptui.core.attach.py_spy import find_py_spy
from ddptui.core.attach.report import merged_stacks, state_table, verdict
from ddptui.core.commands import batch_input
from ddptui.core.commands.batch_input import BatchInputError
from ddptui.core.model.targets import name_ranks
from ddptui.core.model.text import inert

READ_ONLY = "attach is read-only: it takes :state, :stacks and :quit (pdb needs a job started by ddptui)"
NO_LOGS = "no collective log: the job was not started by ddptui (the verdict comes from the stacks)"
EPILOG = """\
Without --batch, prints every rank's state, their stacks merged into one tree and a verdict, once.
With --batch FILE ('-' = stdin), reads :state, :stacks and :quit lines and answers each with a fresh
look. There is no interactive app for attach yet: interactive attach through Python 3.14's remote
execution (PEP 768, sys.remote_exec) is the next step. See docs/attach.md."""


class Attached:
    """A read-only session on a job ddptui did not start: each command takes a fresh look."""

    def __init__(self, job: Job, py_spy: str | None) -> None:
        self.job = job
        self.py_spy = py_spy
        self._said: set[str] = set()

    async def run(self, source: str | None) -> int:
        """Print one look (no `source`), or answer `:state`, `:stacks` and `:quit` lines from it."""
        self._header()
        if source is None:
            await self.show(state=True, stacks=True)
            return 0
        async for line in batch_input.lines(source):
            text = line.strip()
            if not text:
                continue
            print(f"(ddptui) {inert(text)}", flush=True)
            if text == ":quit":
                break
            if text in (":state", ":stacks"):
                await self.show(state=text == ":state", stacks=text == ":stacks")
            else:
                self.note(NO_LOGS if text.startswith(":collectives") else READ_ONLY)
        return 0

    async def show(self, state: bool, stacks: bool) -> None:
        """Look at every rank now; print the state table and verdict, and/or the merged stacks."""
        self.job = self._refresh()
        views, problems = await look(self.job, self.py_spy)
        for problem, ranks in problems.items():
            whose = "" if len(ranks) == len(views) else f"{name_ranks(ranks)}: "
            self.note(whose + problem, once=True)
        lines = state_table(views) if state else []
        if stacks:
            lines += ([""] if lines else []) + merged_stacks(views)
        if state:
            lines += ["", verdict(views, self.job.missing)] if stacks else [verdict(views, self.job.missing)]
        print("\n".join(lines), flush=True)

    def note(self, text: str, once: bool = False) -> None:
        """A line from ddptui itself (`once`: not again if it was said already)."""
        if not (once and text in self._said):
            self._said.add(text)
            print(f"ddptui: {text}", flush=True)

    def _header(self) -> None:
        """What was found: the process, the ranks, and what is not shown."""
        ranks = name_ranks([r.rank for r in self.job.ranks])
        world = max((r.world_size or 0 for r in self.job.ranks), default=0)
        self.note(
            f"attached read-only to pid {self.job.root.pid} ({describe_process(self.job.root)}): "
            f"{ranks} of world size {world or '?'} on {socket.gethostname()}"
        )
        if self.job.missing:
            self.note(
                f"{name_ranks(self.job.missing)} not found under pid {self.job.root.pid} (another host?)"
            )
        if self.job.other_jobs:
            self.note(f"{self.job.other_jobs} other job(s) under pid {self.job.root.pid} not shown")

    def _refresh(self) -> Job:
        """The job found again (torchrun may have restarted its workers); ranks gone stay, as exited."""
        try:
            fresh = job_under(self.job.root, self.job.key) if self.job.root.is_running() else self.job
        except (AttachError, psutil.Error):
            return self.job
        seen = {r.rank for r in fresh.ranks}
        gone = [r for r in self.job.ranks if r.rank not in seen]
        ranks = sorted([*fresh.ranks, *gone], key=lambda r: (r.rank, r.pid))
        return Job(fresh.root, fresh.key, tuple(ranks), fresh.other_jobs)


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors in one line instead of a usage block."""

    def error(self, message: str) -> NoReturn:
        """Raise instead of printing usage and exiting."""
        raise AttachError(f"{message} (see ddptui attach --help)")


def build_parser() -> argparse.ArgumentParser:
    """The `ddptui attach` command line."""
    parser = _Parser(
        prog="ddptui attach",
        usage="ddptui attach [--batch FILE] PID",
        description="Show the ranks of a running PyTorch job ddptui did not start: state, stacks "
        "(through py-spy) and a verdict. Read-only: the ranks are never paused or signalled.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("pid", type=int, metavar="PID", help="a torchrun agent, or any rank of the job")
    parser.add_argument(
        "--batch", metavar="FILE", help="read :state, :stacks and :quit lines from FILE ('-' = stdin)"
    )
    return parser


def main(argv: Sequence[str]) -> int:
    """`ddptui attach ...`: 0 once answered; 2 on bad usage or when PID runs no job."""
    try:
        options = build_parser().parse_args(argv)
        if options.pid <= 0:
            raise AttachError(f"not a process id: {options.pid}")
        if options.batch is not None:
            batch_input.check_source(options.batch)
        attached = Attached(find_job(options.pid), find_py_spy())
        return asyncio.run(attached.run(options.batch))
    except (AttachError, BatchInputError) as exc:
        print(f"ddptui: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `ddptui attach PID | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
