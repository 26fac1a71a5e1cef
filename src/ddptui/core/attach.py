"""`ddptui attach PID`: a job ddptui did not start, read-only: its ranks, their states and stacks.

The ranks are the processes under PID (a torchrun agent; or, when PID is a rank, under whatever
started it) whose environment has `RANK`, one job's worth (same `TORCHELASTIC_RUN_ID`,
`MASTER_ADDR`, `MASTER_PORT`); a rank's own children (DataLoader workers) inherit `RANK` and are
left out. Stacks come from `py-spy dump --nonblocking`: the ranks' memory is read while they run,
so they are never paused, signalled or stopped, at the price of a torn stack now and then on a
rank that is busy (a rank waiting in a collective stands still, so its stack is exact). Without
ddptui's rank side there is no collective log: the verdict comes from the stacks alone.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import os
import shutil
import socket
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import psutil

from ddptui.core import batch_input
from ddptui.core.batch_input import BatchInputError
from ddptui.core.stacks import blocked_at
from ddptui.core.targets import format_ranks
from ddptui.core.text import inert
from ddptui.rank.protocol import Frame, is_library, short_path

CPU_SAMPLE = 0.3
"""Seconds over which each rank's CPU use is measured."""
BUSY = 10.0
"""Percent of one core above which a rank is `running`; a rank blocked in a collective uses ~0."""
DUMP_TIMEOUT = 10.0
"""Seconds one `py-spy dump` may take."""
PARALLEL_DUMPS = 4
PY_SPY_ENV = "DDPTUI_PY_SPY"
"""Environment variable naming the py-spy to use; empty: use none."""
_JOB_ENV = ("TORCHELASTIC_RUN_ID", "MASTER_ADDR", "MASTER_PORT")
_STOPPED = (psutil.STATUS_STOPPED, psutil.STATUS_TRACING_STOP)
NOT_INSTALLED = "py-spy is not installed (pip install py-spy): no stacks, CPU state only"
NOT_PERMITTED = (
    "py-spy may not read the ranks (ptrace refused: attach as their user with kernel.yama.ptrace_scope=0, "
    "or as root, or with CAP_SYS_PTRACE; see docs/attach.md): no stacks, CPU state only"
)
READ_ONLY = "attach is read-only: it takes :state, :stacks and :quit (pdb needs a job started by ddptui)"
NO_LOGS = "no collective log: the job was not started by ddptui (the verdict comes from the stacks)"
EPILOG = """\
Without --batch, prints every rank's state, their stacks merged into one tree and a verdict, once.
With --batch FILE ('-' = stdin), reads :state, :stacks and :quit lines and answers each with a fresh
look. There is no interactive app for attach yet: interactive attach through Python 3.14's remote
execution (PEP 768, sys.remote_exec) is the next step. See docs/attach.md."""


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


# -- finding the ranks ----------------------------------------------------------------------------


def find_job(pid: int) -> Job:
    """The job PID is, or runs: its rank processes. Raise AttachError when there are none."""
    try:
        process = psutil.Process(pid)
        try:
            itself = RankProcess.of(process)
        except psutil.AccessDenied:
            itself = None
        if itself is None:
            return job_under(process)
        return job_under(_launcher(itself), itself.job)
    except psutil.NoSuchProcess:
        raise AttachError(f"no such process: {pid}") from None


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
    """A process's command line, without the interpreter, shortened: `torchrun --nproc-per-node 2 …`."""
    try:
        argv = process.cmdline() or [process.name()]
    except psutil.Error:
        return "?"
    if len(argv) > 1 and os.path.basename(argv[0]).startswith("python"):
        argv = argv[1:]
    text = " ".join([os.path.basename(argv[0]), *argv[1:]])
    return inert(text if len(text) <= 60 else text[:59] + "…")


# -- reading stacks -------------------------------------------------------------------------------


def find_py_spy() -> str | None:
    """The py-spy executable: `$DDPTUI_PY_SPY` if set, else next to this Python (a venv), else on PATH."""
    chosen = os.environ.get(PY_SPY_ENV)
    if chosen is not None:
        return shutil.which(chosen) if chosen else None
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


class StackError(Exception):
    """A stack that could not be read; the message is one line."""


def parse_dump(text: str, pid: int) -> list[Frame]:
    """The main thread's frames, innermost first, from `py-spy dump --json` output."""
    try:
        threads = json.loads(text)
        thread = _main_thread(threads, pid)
        frames = [] if thread is None else thread["frames"]
        return [Frame(str(f["filename"]), int(f["line"]), str(f["name"]).rsplit(".", 1)[-1]) for f in frames]
    except (ValueError, KeyError, TypeError) as exc:
        raise StackError(f"py-spy's output did not parse ({type(exc).__name__})") from None


def _main_thread(threads: Any, pid: int) -> dict[str, Any] | None:
    """The thread whose OS id is the pid (the main thread), else the one named MainThread, else the first."""
    if not isinstance(threads, list) or not all(isinstance(t, dict) for t in threads):
        raise ValueError("not a list of threads")
    found: list[dict[str, Any]] = [t for t in threads if t.get("os_thread_id") == pid]
    found += [t for t in threads if t.get("thread_name") == "MainThread"] + threads
    return found[0] if found else None


def dump_problem(output: str) -> str:
    """One line saying why py-spy failed, from what it printed."""
    if "permission denied" in output.lower() or "not permitted" in output.lower():
        return NOT_PERMITTED
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    first = lines[0].removeprefix("Error: ") if lines else "no output"
    return f"py-spy failed: {inert(first)}"


async def read_stack(py_spy: str, pid: int) -> list[Frame]:
    """The main-thread stack of `pid`, read with py-spy without pausing it; raise StackError."""
    argv = [py_spy, "dump", "--pid", str(pid), "--json", "--nonblocking"]
    child = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(child.communicate(), DUMP_TIMEOUT)
    except BaseException:  # a timeout, or Ctrl-C: py-spy must not outlive the look
        child.kill()
        await child.wait()
        raise
    if child.returncode != 0:
        raise StackError(dump_problem(err.decode(errors="replace") + out.decode(errors="replace")))
    return parse_dump(out.decode(errors="replace"), pid)


# -- one look at every rank -----------------------------------------------------------------------


@dataclass(frozen=True)
class RankView:
    """One rank at one moment: its CPU use and Python stack (innermost first; None: unknown)."""

    proc: RankProcess
    cpu: float | None
    """Percent of one core over the sample; None once the process is gone."""
    stopped: bool = False
    frames: tuple[Frame, ...] | None = None

    @property
    def phase(self) -> str:
        """`exited`, `stopped`, `running` (busy) or `waiting` (idle); `busy`/`idle` without a stack."""
        if self.cpu is None:
            return "exited"
        if self.stopped:
            return "stopped"
        busy = self.cpu >= BUSY
        if self.frames is None:
            return "busy" if busy else "idle"
        return "running" if busy else "waiting"

    def describe(self) -> str:
        """`waiting at train.py:30 in all_reduce`, `running at train.py:12`, `idle`, `exited`."""
        if not self.frames:
            return self.phase
        user, callee = blocked_at(list(self.frames))
        return self.phase + (f" at {user}" if user else "") + (f" in {callee}" if callee else "")

    def collective(self) -> tuple[str, Frame | None] | None:
        """The torch.distributed call the rank stands in, with its call site; None when elsewhere."""
        if not self.frames:
            return None
        library = list(itertools.takewhile(lambda f: is_library(f.file), self.frames))
        if not any(f.file.endswith("distributed_c10d.py") for f in library):
            return None
        user, callee = blocked_at(list(self.frames))
        return (callee or library[0].func), user


async def look(job: Job, py_spy: str | None) -> tuple[list[RankView], dict[str, list[int]]]:
    """Every rank's CPU use over CPU_SAMPLE seconds, then its stack; and why stacks are missing."""
    cpu = await _cpu_use(job.ranks)
    problems: dict[str, list[int]] = {}
    if py_spy is None:
        problems[NOT_INSTALLED] = [r.rank for r in job.ranks]
        return [RankView(r, cpu[r.pid], _stopped(r)) for r in job.ranks], problems
    limit = asyncio.Semaphore(PARALLEL_DUMPS)

    async def view(rank: RankProcess) -> RankView:
        if cpu[rank.pid] is None:
            return RankView(rank, None)
        async with limit:
            frames, problem = await _stack(py_spy, rank)
        if problem is not None and not rank.process.is_running():
            return RankView(rank, None)
        if problem is not None:
            problems.setdefault(problem, []).append(rank.rank)
        return RankView(rank, cpu[rank.pid], _stopped(rank), frames)

    return list(await asyncio.gather(*(view(rank) for rank in job.ranks))), problems


async def _stack(py_spy: str, rank: RankProcess) -> tuple[tuple[Frame, ...] | None, str | None]:
    """A rank's stack, or why it could not be read; tried twice (a busy rank's read can tear)."""
    problem = "py-spy timed out"
    for _ in range(2):
        try:
            return tuple(await read_stack(py_spy, rank.pid)), None
        except StackError as exc:
            problem = str(exc)
        except TimeoutError:
            pass
        if problem == NOT_PERMITTED:
            break
    return None, problem


async def _cpu_use(ranks: Sequence[RankProcess]) -> dict[int, float | None]:
    """Percent of one core each rank used over CPU_SAMPLE seconds; None for a rank that is gone."""
    for rank in ranks:
        with contextlib.suppress(psutil.Error):
            rank.process.cpu_percent(None)
    await asyncio.sleep(CPU_SAMPLE)
    use: dict[int, float | None] = {}
    for rank in ranks:
        try:
            alive = rank.process.is_running() and rank.process.status() != psutil.STATUS_ZOMBIE
            use[rank.pid] = rank.process.cpu_percent(None) if alive else None
        except psutil.Error:
            use[rank.pid] = None
    return use


def _stopped(rank: RankProcess) -> bool:
    """True when the rank is stopped (SIGSTOP, or held by a debugger such as gdb)."""
    try:
        return rank.process.status() in _STOPPED
    except psutil.Error:
        return False


# -- what is printed ------------------------------------------------------------------------------


def ranks_word(ranks: Iterable[int]) -> str:
    """`rank 1` or `ranks 0,2-3`."""
    unique = set(ranks)
    return f"{'rank' if len(unique) == 1 else 'ranks'} {format_ranks(unique)}"


def state_table(views: Sequence[RankView]) -> list[str]:
    """One line per rank: rank, local rank, world size, host, pid, CPU use and state."""
    header = ("rank", "local", "world", "host", "pid", "cpu", "state")
    rows = [header] + [
        (
            str(v.proc.rank),
            _or_dash(v.proc.local_rank),
            _or_dash(v.proc.world_size),
            v.proc.host,
            str(v.proc.pid),
            "-" if v.cpu is None else f"{v.cpu:.0f}%",
            inert(v.describe()),
        )
        for v in views
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header) - 1)]
    return ["  ".join([*(c.ljust(w) for c, w in zip(row, widths, strict=False)), row[-1]]) for row in rows]


def _or_dash(value: int | None) -> str:
    """A number, or `-` when unknown."""
    return "-" if value is None else str(value)


def verdict(views: Sequence[RankView], missing: Sequence[int] = ()) -> str:
    """One line from the stacks: ranks grouped by the collective and call site they wait in."""
    if all(v.frames is None for v in views):
        return "no verdict: no rank's stack could be read"
    inside: dict[str, list[int]] = {}
    elsewhere: dict[str, list[int]] = {}
    for v in views:
        point = v.collective()
        if point is not None:
            callee, site = point
            inside.setdefault(f"{callee} ({site})" if site else callee, []).append(v.proc.rank)
        else:
            elsewhere.setdefault(_now(v.describe()), []).append(v.proc.rank)
    if missing:
        elsewhere.setdefault("was not found here", []).extend(missing)
    if not inside:
        return "no hang seen: no rank waits in a collective"
    parts = [
        f"{ranks_word(ranks)} {'waits' if len(ranks) == 1 else 'wait'} in {where}"
        for where, ranks in sorted(inside.items(), key=lambda item: (-len(item[1]), item[1]))
    ]
    parts += [f"{ranks_word(ranks)} {_plural(now, len(ranks))}" for now, ranks in elsewhere.items()]
    kind = "deadlock" if len(inside) > 1 else "hang" if elsewhere else "no hang seen"
    tail = " (one look: look again to see whether they move)" if kind == "no hang seen" else ""
    return inert(f"{kind}: {'; '.join(parts)}{tail}")


def _now(state: str) -> str:
    """A rank's state as the rest of a sentence: `is at train.py:11`, `is running at ...`, `has exited`."""
    if state == "exited":
        return "has exited"
    return "is " + (state.removeprefix("waiting ") if state.startswith("waiting at") else state)


def _plural(phrase: str, count: int) -> str:
    """`is ...` / `has ...` said of several ranks."""
    if count == 1:
        return phrase
    verb, _, rest = phrase.partition(" ")
    return f"{({'is': 'are', 'has': 'have', 'was': 'were'}).get(verb, verb)} {rest}"


@dataclass
class _Node:
    """A frame of the merged tree and the ranks whose stacks pass through it."""

    frame: Frame
    ranks: list[int] = field(default_factory=list)
    children: dict[Frame, _Node] = field(default_factory=dict)


def merged_stacks(views: Sequence[RankView]) -> list[str]:
    """Every rank's main-thread stack in one tree, outermost frame first; ranks part where stacks do."""
    root = _Node(Frame("", 0))
    for v in views:
        frames = list(reversed(v.frames)) if v.frames else [Frame("", 0, f"<{v.describe()}>")]
        node = root
        for frame in frames:
            node = node.children.setdefault(frame, _Node(frame))
            node.ranks.append(v.proc.rank)
    width = max((len(ranks_word(v.proc.rank for v in views)), len("rank 0")))
    lines: list[str] = []
    _render(list(root.children.values()), "", width, lines)
    return lines


def _render(nodes: list[_Node], indent: str, width: int, lines: list[str]) -> None:
    """Lines for sibling subtrees: a run of frames the same ranks share, then the forks below it."""
    for index, node in enumerate(nodes):
        fork, last = len(nodes) > 1, index == len(nodes) - 1
        head = indent + (("└ " if last else "├ ") if fork else "")
        rest = indent + (("  " if last else "│ ") if fork else "")
        chain = [node]
        while len(chain[-1].children) == 1 and next(iter(chain[-1].children.values())).ranks == node.ranks:
            chain.append(next(iter(chain[-1].children.values())))
        for row, text in enumerate(_fold(chain)):
            label = ranks_word(node.ranks) if row == 0 else ""
            lines.append(inert(f"{head if row == 0 else rest}{label.ljust(width)}  {text}"))
        _render(list(chain[-1].children.values()), rest, width, lines)


def _fold(chain: list[_Node]) -> list[str]:
    """A chain's frames as text, runs of 3+ library frames folded (its innermost frame always shown)."""
    texts: list[str] = []
    for is_lib, run in itertools.groupby(chain[:-1], key=lambda node: is_library(node.frame.file)):
        nodes = list(run)
        if is_lib and len(nodes) >= 3:
            texts.append(f"… {len(nodes)} library frames")
        else:
            texts += [_frame_text(node.frame) for node in nodes]
    return [*texts, _frame_text(chain[-1].frame)]


def _frame_text(frame: Frame) -> str:
    """`main (train.py:18)`; a library frame by its package path, as py-spy prints it."""
    if not frame.line:
        return frame.func
    path = frame.file.rpartition("-packages/")[2] if is_library(frame.file) else short_path(frame.file)
    return f"{frame.func} ({path}:{frame.line})"


# -- the command ----------------------------------------------------------------------------------


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
            whose = "" if len(ranks) == len(views) else f"{ranks_word(ranks)}: "
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
        ranks = ranks_word([r.rank for r in self.job.ranks])
        world = max((r.world_size or 0 for r in self.job.ranks), default=0)
        self.note(
            f"attached read-only to pid {self.job.root.pid} ({describe_process(self.job.root)}): "
            f"{ranks} of world size {world or '?'} on {socket.gethostname()}"
        )
        if self.job.missing:
            self.note(
                f"{ranks_word(self.job.missing)} not found under pid {self.job.root.pid} (another host?)"
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
