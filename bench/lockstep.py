"""Lockstep latency: one `n` to N paused plain-Python ranks, through ddptui and without it.

For each job size N (default 4, 16, 64) the bench starts N ranks of a tiny script that stops at
`pdb.Pdb().set_trace()` and then loops over `x = i`, so every `n` steps one line and pauses again.
It times the same step six ways, each on ranks of its own:

* stock: a bare `selectors` loop over stock-pdb ranks (`python rank.py`, PYTHONBREAKPOINT unset,
  no ddptui code) on raw ptys: write `n\\r` to every pty, read each until it ends with `(Pdb) `.
  This is the baseline: the ranks' own work plus the pty round trip.
* rankpdb: the same bare loop over `python -m ddptui.rank rank.py` ranks with no link (RankPdb
  and its prompt, no events sent);
* hooks: the same again with each rank's link connected to a socket the loop reads and ignores:
  what ddptui's rank side (RankPdb and its one event a step) costs without the core; `x hooks`
  is then what the core adds on the same kind of ranks.
* core: `await Session.broadcast("n")`, from the call until it returns (every rank back at its
  prompt, as its link and its pty both say). Its ranks' pdb reads the commands ddptui sends as
  plain lines (readline comes only for keys typed into a pane), as the app's do; the stock,
  rankpdb, hooks and tmux ways' ranks read through readline, as pdb does on a terminal.
* batch: `ddptui --batch` end to end, its ranks reading plain lines too: a step is the time
  from one `(ddptui) n` echo on its stdout (a pipe the bench reads as it prints) to the next,
  which is the whole cost of a line: reading it, the lockstep and the transcript. Each run has
  B timed lines (--batch-steps, default 5 x 40 x max(1, 64 / N), 5 S with --steps S: steps are
  short on small jobs) after a warm-up; the start and the end of a run are not timed.
* tmux: N panes of stock-pdb ranks in one tmux window (a private `-L` server, removed at the end)
  with `synchronize-panes` on: one `send-keys n Enter`, then wait until every pane printed a new
  prompt, as a control-mode client (`tmux -C`) sees the panes' output.

Each way's CPU time over its timed steps is split (as the scheduler counts it, all threads): one
rank's per step, and the driver's per step (this process: the bare loop or the core; for tmux its
server and control client too). With many more ranks than cores the machine is saturated and a
step takes about (N x rank + driver) / cores: a microsecond of one rank's CPU counts N times, one
of the driver's once.

Every way but batch takes turns in blocks of five timed steps (after two untimed ones: the first
steps after the other ways' turns are slower, whichever way it is), on ranks alive side by side,
so load that comes and goes during a run moves every way alike instead of the ratios; batch (a
process of its own) runs after them. Ratios are medians over the stock median. The load average
is printed: on a busy machine, run it again. `--json` prints the figures as JSON on standard
output (the table goes to standard error). Ctrl-C ends every rank.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import itertools
import json
import math
import os
import platform
import re
import selectors
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ptyprocess import PtyProcess

from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank.protocol import RANK_ENV, SOCKET_ENV, STATE_DIR_ENV, TOKEN_ENV, Welcome

WARMUP = 3
"""Untimed steps of each way before the timed ones."""
STEPS = 40
STEP_BUDGET = 1600
"""Timed steps per way: STEP_BUDGET / N, at least STEPS. Forty 4-rank steps are 8 ms of a way's
time, which one scheduling hiccup can move by a third (two ways that are the same code can then
differ by half); a way gets at least 400 of them."""
BLOCK = 5
TURN_WARMUP = 2
"""Untimed steps at the start of each block: a way's first steps after the others' turn are
up to twice as slow (its processes idled meanwhile), whichever way it is."""
"""Timed steps per block while the bare-loop ways take turns."""
STEP_TIMEOUT = 30.0
"""Seconds a step (or a start) may take before the bench gives up."""
BATCH_TIMEOUT = 300.0
"""Seconds one `ddptui --batch` run may take."""
STOCK_PROMPT = b"(Pdb) "
TMUX_SIZE = (400, 200)
"""The tmux window's columns and lines: room for 64 tiled panes of about 43x24."""
WAYS = {
    "stock": "stock pdb, bare pty loop",
    "rankpdb": "ddptui.rank ranks, no link, bare loop",
    "hooks": "ddptui.rank ranks + link, bare loop",
    "core": 'ddptui core, Session.broadcast("n")',
    "batch": "ddptui --batch, end to end",
    "tmux": "tmux synchronize-panes",
}
RANK_SCRIPT = """\
import pdb

pdb.Pdb().set_trace()
for i in range(10**9):
    x = i
"""
_TRAILING_ESCAPES = re.compile(rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b[=>])*\Z")
_OCTAL = re.compile(rb"\\([0-7]{3})")


@dataclass
class Row:
    """The figures of one job size: seconds per step of each way."""

    nproc: int
    times: dict[str, list[float]] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    """Why a way has no figures (tmux missing, a failure)."""
    load: float = 0.0
    cpu: dict[str, list[int]] = field(default_factory=dict)
    """A way's CPU time over its timed steps, in ns: its ranks' and its driver's."""

    def add_cpu(self, way: str, ranks: int, drivers: int) -> None:
        """Count the CPU time of a block of timed steps."""
        totals = self.cpu.setdefault(way, [0, 0])
        totals[0] += ranks
        totals[1] += drivers

    def rank_cpu(self, way: str) -> float:
        """Seconds of CPU one rank used per step, on average; NaN when not measured."""
        steps = len(self.times.get(way, []))
        return self.cpu[way][0] / 1e9 / steps / self.nproc if way in self.cpu and steps else math.nan

    def driver_cpu(self, way: str) -> float:
        """Seconds of CPU the driver (the core, the bare loop, tmux) used per step; NaN when not measured."""
        steps = len(self.times.get(way, []))
        return self.cpu[way][1] / 1e9 / steps if way in self.cpu and steps else math.nan

    def median(self, way: str) -> float:
        """The median step of a way; NaN when not measured."""
        values = self.times.get(way)
        return statistics.median(values) if values else math.nan

    def mean(self, way: str) -> float:
        """The mean step of a way; NaN when not measured."""
        values = self.times.get(way)
        return statistics.mean(values) if values else math.nan

    def p90(self, way: str) -> float:
        """The 90th percentile step of a way; NaN when not measured."""
        values = self.times.get(way, [])
        return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else math.nan

    def ratio(self, way: str, base: str = "stock") -> float:
        """A way's median over the baseline's median."""
        return self.median(way) / self.median(base)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: job sizes, timed steps, batch runs, ways to skip, output format."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,64", help="comma-separated rank counts (4,16,64)")
    parser.add_argument(
        "--steps", type=int, help=f"timed steps S per way and size (max({STEPS}, {STEP_BUDGET} / N))"
    )
    parser.add_argument(
        "--batch-steps", type=int, help="B: timed `n` lines of a batch run (5 x S or 40, x max(1, 64 / N))"
    )
    parser.add_argument("--batch-runs", type=int, default=2, help="ddptui --batch runs (2)")
    parser.add_argument("--skip", default="", help="ways to leave out, e.g. rankpdb,hooks,core,batch,tmux")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON instead of a table")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    args.skip = {way.strip() for way in args.skip.split(",") if way.strip()}
    if (
        min(args.steps or 2, args.batch_steps or 2) < 2
        or args.batch_runs < 1
        or not args.sizes
        or min(args.sizes) < 1
    ):
        parser.error("need --steps >= 2, --batch-steps >= 2, --batch-runs >= 1 and rank counts >= 1")
    if not args.skip <= set(WAYS) - {"stock"}:
        parser.error(f"--skip takes {','.join(sorted(set(WAYS) - {'stock'}))}")
    return args


def at_prompt(data: bytes, prompt: bytes) -> bool:
    """True when `data`, trailing escape sequences stripped, ends with `prompt`."""
    if data.endswith(prompt):
        return True
    return data[: _TRAILING_ESCAPES.search(data).start()].endswith(prompt)  # type: ignore[union-attr]


def drain(fd: int) -> bytes | None:
    """Read what a non-blocking fd has right now; None once it is closed (EOF, or EIO on a pty)."""
    chunks: list[bytes] = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        except OSError:
            chunk = b""
        if not chunk:
            return b"".join(chunks) if chunks else None
        chunks.append(chunk)
    return b"".join(chunks)


def bench_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of every rank and tmux: ddptui's TERM, no PYTHONBREAKPOINT, TMUX or ddptui link."""
    unset = ("PYTHONBREAKPOINT", "TMUX", "TMUX_PANE")
    env = {k: v for k, v in os.environ.items() if k not in unset and not k.startswith("DDPTUI_")}
    env["TERM"] = "xterm-256color"
    env.update(extra or {})
    return env


# -- bare loops on raw ptys ------------------------------------------------------------------
class Sink:
    """A unix socket that accepts the ranks' links, welcomes each (a rank waits for that before its
    first prompt) and drops what they send (no core)."""

    def __init__(self, path: str, selector: selectors.BaseSelector) -> None:
        self._selector = selector
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(path)
        self._listener.listen(128)
        self._listener.setblocking(False)
        self._links: list[socket.socket] = []
        selector.register(self._listener, selectors.EVENT_READ, self._accept)

    def _accept(self) -> None:
        """Take a new link."""
        link, _ = self._listener.accept()
        link.sendall(Welcome().encode())
        link.setblocking(False)
        self._links.append(link)
        self._selector.register(link, selectors.EVENT_READ, lambda: self._drop(link))

    def _drop(self, link: socket.socket) -> None:
        """Read and forget what a link sent; close it when the rank hangs up."""
        try:
            while link.recv(65536):
                pass
        except BlockingIOError:
            return
        except OSError:
            pass
        self._selector.unregister(link)
        link.close()

    def close(self) -> None:
        """Close every link and the socket."""
        for sock in [*self._links, self._listener]:
            if sock.fileno() >= 0:
                self._selector.unregister(sock)
                sock.close()


class PtyRanks:
    """N rank processes, each on a raw pty, stepped by a bare selector loop (no ddptui core)."""

    def __init__(
        self, argv: list[str], envs: list[dict[str, str]], prompts: list[bytes], sink: str = ""
    ) -> None:
        self.prompts = prompts
        self.selector = selectors.DefaultSelector()
        self.sink = Sink(sink, self.selector) if sink else None
        self.procs: list[PtyProcess] = []
        try:
            for index, env in enumerate(envs):
                proc = PtyProcess.spawn(argv, env=env, dimensions=(24, 80))
                self.procs.append(proc)
                os.set_blocking(proc.fd, False)
                self.selector.register(proc.fd, selectors.EVENT_READ, index)
        except BaseException:
            self.close()
            raise

    def wait_prompts(self) -> None:
        """Read every pty until it ends with its rank's prompt (and drain the links meanwhile)."""
        pending = set(range(len(self.procs)))
        new = [bytearray() for _ in self.procs]
        deadline = time.monotonic() + STEP_TIMEOUT
        while pending:
            events = self.selector.select(max(deadline - time.monotonic(), 0))
            if not events:
                raise RuntimeError(f"{len(pending)} ranks never showed their prompt")
            for key, _ in events:
                if callable(key.data):
                    key.data()
                    continue
                data = drain(key.fd)
                if data is None:
                    said = bytes(new[key.data][-300:]).decode(errors="replace").strip()
                    raise RuntimeError(f"rank {key.data} ended its terminal (last output: {said!r})")
                new[key.data] += data
                if key.data in pending and at_prompt(bytes(new[key.data]), self.prompts[key.data]):
                    pending.discard(key.data)

    def step(self) -> float:
        """Write `n` to every pty, wait for every prompt; the wall time taken."""
        began = time.perf_counter()
        for proc in self.procs:
            os.write(proc.fd, b"n\r")
        self.wait_prompts()
        return time.perf_counter() - began

    def close(self) -> None:
        """Kill every rank, close its pty and the links."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.kill(signal.SIGKILL)
        for proc in self.procs:
            proc.wait()
            if proc.fd in self.selector.get_map():
                self.selector.unregister(proc.fd)
            proc.delayafterclose = 0  # ptyprocess sleeps 0.1 s a close by default: 19 s for 3 x 64
            proc.close()
        if self.sink is not None:
            self.sink.close()
        self.selector.close()


def stock_ranks(nproc: int, script: str) -> PtyRanks:
    """N stock-pdb ranks: `python rank.py`, nothing of ddptui in them."""
    return PtyRanks([sys.executable, script], [bench_env() for _ in range(nproc)], [STOCK_PROMPT] * nproc)


def ddptui_ranks(nproc: int, script: str, tmp: str, linked: bool) -> PtyRanks:
    """N `python -m ddptui.rank rank.py` ranks; linked, their links end in a sink (no core)."""
    sink = os.path.join(tmp, f"sink-{nproc}.sock") if linked else ""
    link = {SOCKET_ENV: sink, TOKEN_ENV: "0" * 32, STATE_DIR_ENV: tmp} if linked else {}
    envs = [bench_env(link | {RANK_ENV: str(i), "RANK": str(i)}) for i in range(nproc)]
    prompts = [f"(Pdb r{i}) ".encode() for i in range(nproc)]
    return PtyRanks([sys.executable, "-m", "ddptui.rank", script], envs, prompts, sink)


@dataclass
class Way:
    """One way of stepping, set up and ready: `step` times one step, `close` ends its ranks.

    `ranks` and `drivers` are the processes whose CPU time a step is split into: the rank
    processes, and what steps them (this process; for tmux its server and control client too).
    """

    step: Callable[[], Awaitable[float]]
    close: Callable[[], Awaitable[None]]
    ranks: list[int] = field(default_factory=list)
    drivers: list[int] = field(default_factory=lambda: [os.getpid()])


def cpu_ns(pids: list[int]) -> int:
    """Nanoseconds the processes ran on a CPU (every thread), as the scheduler counts it
    (`/proc/PID/task/*/schedstat`); a process gone meanwhile counts 0."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in os.listdir(f"/proc/{pid}/task"):
                path = f"/proc/{pid}/task/{task}/schedstat"
                with contextlib.suppress(OSError, ValueError), open(path) as stat:
                    total += int(stat.read().split()[0])
    return total


def bare_way(ranks: PtyRanks) -> Way:
    """A bare-loop way (stock, rankpdb, hooks) whose ranks are at their first prompt."""

    async def step() -> float:
        return ranks.step()

    async def close() -> None:
        ranks.close()

    ranks.wait_prompts()
    return Way(step, close, [proc.pid for proc in ranks.procs])


def tmux_way(nproc: int, script: str) -> Way:
    """tmux panes at their first prompt (started before the core's session: a tmux server that
    daemonizes while a session is the subreaper would be the session's to reap)."""
    tmux = shutil.which("tmux")
    if tmux is None:
        raise RuntimeError("tmux is not installed")
    panes = TmuxPanes(nproc, script, tmux)

    async def step() -> float:
        return panes.step()

    async def close() -> None:
        panes.close()

    try:
        panes.start()
    except BaseException:
        panes.close()
        raise
    assert panes.client is not None
    panes_pids = [int(pid) for pid in panes.run("list-panes", "-t", "bench", "-F", "#{pane_pid}").split()]
    return Way(step, close, panes_pids, [os.getpid(), panes.server_pid, panes.client.pid])


async def core_way(nproc: int, script: str) -> Way:
    """A session of N ranks at their first prompt, stepped by `Session.broadcast`."""
    session = Session(LaunchSpec(target=script, nproc=nproc, stall_timeout=60, env=bench_env()))

    async def step() -> float:
        return (await core_steps(session, 1))[0]

    try:
        await session.start()
        await session.wait_settled()
    except BaseException:
        await session.close()
        raise
    return Way(step, session.close, [rank.transport.pid for rank in session.ranks])


async def measure_turns(row: Row, script: str, tmp: str, steps: int, skip: set[str]) -> None:
    """Time every way but batch in alternating blocks, on ranks alive side by side.

    Taking turns, every way sees the same machine: load that comes and goes during the run moves
    them all, not the ratios. A way that fails to start or to step gets a note and leaves the turns.
    """
    starts: dict[str, Callable[[], Awaitable[Way]]] = {
        "tmux": lambda: asyncio.to_thread(tmux_way, row.nproc, script),
        "stock": lambda: asyncio.to_thread(bare_way, stock_ranks(row.nproc, script)),
        "rankpdb": lambda: asyncio.to_thread(bare_way, ddptui_ranks(row.nproc, script, tmp, False)),
        "hooks": lambda: asyncio.to_thread(bare_way, ddptui_ranks(row.nproc, script, tmp, True)),
        "core": lambda: core_way(row.nproc, script),
    }
    ways: dict[str, Way] = {}
    try:
        for name, start in starts.items():
            if name in skip:
                continue
            try:
                ways[name] = await start()
                for _ in range(WARMUP):
                    await ways[name].step()
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                await drop(row, ways, name, exc)
        order = sorted(ways, key=list(WAYS).index)
        for block, start_step in enumerate(range(0, steps, BLOCK)):
            turn = order[block % len(order) :] + order[: block % len(order)]
            for name in [n for n in turn if n in ways]:
                try:
                    way = ways[name]
                    for _ in range(TURN_WARMUP):
                        await way.step()
                    ranks, drivers = cpu_ns(way.ranks), cpu_ns(way.drivers)
                    for _ in range(min(BLOCK, steps - start_step)):
                        row.times.setdefault(name, []).append(await way.step())
                    row.add_cpu(name, cpu_ns(way.ranks) - ranks, cpu_ns(way.drivers) - drivers)
                except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                    await drop(row, ways, name, exc)
    finally:
        for way in ways.values():
            await way.close()


async def drop(row: Row, ways: dict[str, Way], name: str, exc: BaseException) -> None:
    """A way failed: end its ranks, forget its times, say why in its note."""
    way = ways.pop(name, None)
    if way is not None:
        with contextlib.suppress(Exception):
            await way.close()
    row.times.pop(name, None)
    row.notes[name] = failure(row, exc)


def failure(row: Row, exc: BaseException) -> str:
    """A way's note when it failed: the first and last lines of what went wrong."""
    said = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    why = " ... ".join(dict.fromkeys([said[0], said[-1]])) if said else type(exc).__name__
    return f"not measured at N={row.nproc}: {why}"


# -- ddptui core -----------------------------------------------------------------------------
async def core_steps(session: Session, steps: int) -> list[float]:
    """Time `steps` lockstep `n` broadcasts; fail if a rank does not come back to its prompt."""
    times = []
    for _ in range(steps):
        began = time.perf_counter()
        result = await session.broadcast("n")
        times.append(time.perf_counter() - began)
        lost = [r.rank for r in result.replies if r.state.phase is not Phase.PAUSED] + list(result.skipped)
        if lost or len(result.replies) != len(session.ranks):
            raise RuntimeError(f"ranks {lost} did not come back to a prompt")
    return times


# -- ddptui --batch --------------------------------------------------------------------------
ECHO = b"(ddptui) n\n"


def batch_run(nproc: int, script: str, tmp: str, steps: int) -> list[float]:
    """Seconds between one step's `(ddptui) n` echo and the next's in one `ddptui --batch` run of
    `steps` lines `n`, read off its stdout pipe as it prints them (checked: all ranks answer).

    The transcript prints a line's echo, and flushes, right after that line's command went out to
    the ranks (while they run it): from one echo to the next is one line's whole cost, command
    reading, lockstep and transcript included.
    """
    commands = os.path.join(tmp, f"batch-{steps}.txt")
    with open(commands, "w") as out:
        out.write("n\n" * steps)
    argv = [sys.executable, "-m", "ddptui", "--nproc-per-node", str(nproc), "--stall-timeout", "60"]
    proc = subprocess.Popen(
        [*argv, "--batch", commands, script],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=bench_env(),
    )
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    text, echoes, tail = bytearray(), [], b""
    deadline = time.monotonic() + BATCH_TIMEOUT
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while True:
                if not selector.select(max(deadline - time.monotonic(), 0)):
                    raise RuntimeError(f"ddptui --batch ran more than {BATCH_TIMEOUT:.0f}s")
                now, data = time.perf_counter(), drain(fd)
                if data is None:
                    break
                text += data
                echoes += [now] * (tail + data).count(ECHO)  # an echo split over two reads counts once
                tail = (tail + data)[-len(ECHO) + 1 :]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        proc.stdout.close()
    said = text.decode(errors="replace")
    if len(echoes) != steps or said.count(": paused at rank.py") != nproc:
        raise RuntimeError(f"ddptui --batch did not step every rank {steps} times:\n{said[-2000:]}")
    return [later - earlier for earlier, later in itertools.pairwise(echoes)]


def measure_batch(row: Row, script: str, tmp: str, steps: int, runs: int) -> None:
    """`runs` runs of `ddptui --batch` with WARMUP + `steps` + 1 lines `n`: the last `steps`
    echo-to-echo times of each are its timed steps."""
    for _ in range(runs):
        steps_taken = batch_run(row.nproc, script, tmp, WARMUP + steps + 1)
        row.times.setdefault("batch", []).extend(steps_taken[WARMUP:])


# -- tmux --------------------------------------------------------------------------------------
class TmuxPanes:
    """N stock-pdb ranks in the panes of one tmux window with synchronize-panes on.

    A private server (`-L`, no config file) with a control-mode client: the client's stdin takes
    tmux commands, its stdout says `%output %<pane> <octal-escaped bytes>` for every pane.
    """

    def __init__(self, nproc: int, script: str, tmux: str) -> None:
        self.nproc = nproc
        self.script = script
        self.tmux = tmux
        self.server = f"ddptui-bench-{os.getpid()}"
        self.socket_path = ""
        self.server_pid = 0
        self.client: subprocess.Popen[bytes] | None = None
        self._partial = b""
        self._last = b""

    def run(self, *args: str) -> str:
        """One tmux command on the private server; its output."""
        argv = [self.tmux, "-L", self.server, "-f", "/dev/null", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=bench_env(), check=True).stdout

    def start(self) -> None:
        """A window with a placeholder pane, the client, then a pane per rank, tiled, synchronized."""
        columns, lines = TMUX_SIZE
        self.run("new-session", "-d", "-s", "bench", "-x", str(columns), "-y", str(lines), "exec sleep 3600")
        self.socket_path, pid = self.run("display-message", "-p", "#{socket_path} #{pid}").rsplit(maxsplit=1)
        self.server_pid = int(pid)
        self.run("set-option", "-g", "window-size", "manual")
        argv = [self.tmux, "-L", self.server, "-C", "attach-session", "-t", "bench"]
        self.client = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=bench_env())
        assert self.client.stdout is not None
        os.set_blocking(self.client.stdout.fileno(), False)
        rank = shlex.quote(f"exec {shlex.join([sys.executable, self.script])}")
        for _ in range(self.nproc):  # the placeholder is %0, so the ranks are %1..%N
            self.send(f"split-window -d -t bench {rank}", "select-layout -t bench tiled")
        self.send(
            "kill-pane -t %0", "select-layout -t bench tiled", "set-option -w -t bench synchronize-panes on"
        )
        self.wait_prompts()

    def send(self, *commands: str) -> None:
        """Give the control client tmux commands, one a line."""
        assert self.client is not None and self.client.stdin is not None
        self.client.stdin.write("".join(f"{command}\n" for command in commands).encode())
        self.client.stdin.flush()

    def wait_prompts(self) -> None:
        """Read the client until every rank's pane printed a new `(Pdb) ` prompt."""
        assert self.client is not None and self.client.stdout is not None
        fd = self.client.stdout.fileno()
        pending = set(range(1, self.nproc + 1))
        new = {pane: b"" for pane in pending}
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while pending:
                if not selector.select(STEP_TIMEOUT):
                    raise RuntimeError(f"tmux: {len(pending)} panes never showed a new prompt")
                for pane, data in self._outputs(drain(fd) or b""):
                    new[pane] = new.get(pane, b"") + data
                    if pane in pending and at_prompt(new[pane], STOCK_PROMPT):
                        pending.discard(pane)

    def _outputs(self, data: bytes) -> list[tuple[int, bytes]]:
        """The `(pane, bytes)` of each complete `%output` line; raise on `%error` and `%exit`."""
        if not data and self.client is not None and self.client.poll() is not None:
            raise RuntimeError(f"tmux: the control client ended ({self._last.decode(errors='replace')})")
        *lines, self._partial = (self._partial + data).split(b"\n")
        outputs = []
        for line in lines:
            if line.startswith(b"%output "):
                _, pane, text = line.split(b" ", 2)
                outputs.append((int(pane[1:]), _OCTAL.sub(lambda m: bytes([int(m[1], 8)]), text)))
            elif line.startswith((b"%error", b"%exit")):
                raise RuntimeError(f"tmux: {self._last.decode(errors='replace') or line.decode()}")
            elif not line.startswith(b"%"):
                self._last = line
        return outputs

    def step(self) -> float:
        """`send-keys n Enter` to the synchronized window; the wall time until every pane prompts."""
        began = time.perf_counter()
        self.send("send-keys -t bench n Enter")
        self.wait_prompts()
        return time.perf_counter() - began

    def close(self) -> None:
        """Kill the server (its panes get SIGHUP), let the client go, remove the socket file."""
        if self.socket_path:
            subprocess.run(
                [self.tmux, "-L", self.server, "kill-server"],
                capture_output=True,
                env=bench_env(),
                check=False,
            )
        if self.client is not None:
            for pipe in (self.client.stdin, self.client.stdout):
                if pipe is not None:
                    pipe.close()
            try:
                self.client.wait(5)
            except subprocess.TimeoutExpired:
                self.client.kill()
                self.client.wait()
        self._reap_server()
        if self.socket_path and os.path.exists(self.socket_path):
            os.remove(self.socket_path)

    def _reap_server(self) -> None:
        """Collect the server's exit status if it was adopted here (a Session makes us a subreaper)."""
        deadline = time.monotonic() + 5.0
        while self.server_pid and time.monotonic() < deadline:
            try:
                if os.waitpid(self.server_pid, os.WNOHANG)[0]:
                    return
            except ChildProcessError:
                return
            time.sleep(0.01)


# -- one job size ----------------------------------------------------------------------------
def timed_steps(args: argparse.Namespace, nproc: int) -> int:
    """S, the timed steps of each way: --steps, else STEP_BUDGET / N, at least STEPS."""
    return int(args.steps or max(STEPS, STEP_BUDGET // nproc))


def steps_said(args: argparse.Namespace) -> str:
    """The timed steps per way, in words for the table's heading."""
    return str(args.steps) if args.steps else f"max({STEPS}, {STEP_BUDGET} / N)"


def batch_steps(args: argparse.Namespace, nproc: int) -> int:
    """B, a batch run's timed steps: --batch-steps, else 5 x (--steps or STEPS), x 64 / N below 64."""
    return int(args.batch_steps or 5 * (args.steps or STEPS) * max(1, 64 // nproc))


def measure(nproc: int, script: str, tmp: str, args: argparse.Namespace) -> Row:
    """Every way at one job size: all but batch taking turns, then batch; a way that fails gets a note."""
    row = Row(nproc, load=os.getloadavg()[0])
    asyncio.run(measure_turns(row, script, tmp, timed_steps(args, nproc), args.skip))
    if "batch" not in args.skip:
        try:
            measure_batch(row, script, tmp, batch_steps(args, nproc), args.batch_runs)
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            row.times.pop("batch", None)
            row.notes["batch"] = failure(row, exc)
    return row


# -- report ----------------------------------------------------------------------------------
def machine() -> dict[str, object]:
    """Where and when the bench ran."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {
        "date": datetime.date.today().isoformat(),
        "usable_cores": usable,
        "online_cores": os.cpu_count(),
        "platform": f"{platform.machine()}, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "load_average": round(os.getloadavg()[0], 2),
    }


def ms(value: float, width: int = 8) -> str:
    """Seconds as right-aligned milliseconds, `-` for not measured."""
    return f"{'-':>{width}}" if math.isnan(value) else f"{value * 1e3:>{width}.2f}"


def us(value: float, width: int) -> str:
    """Seconds as right-aligned microseconds, `-` for not measured."""
    return f"{'-':>{width}}" if math.isnan(value) else f"{value * 1e6:>{width}.0f}"


def times(value: float, width: int = 8) -> str:
    """A ratio, `-` for not measured."""
    return f"{'-':>{width}}" if math.isnan(value) else f"{value:>{width}.2f}"


def table(row: Row, skip: set[str]) -> list[str]:
    """The lines of one job size: a way a line, in ms per step, ratios over stock and hooks."""
    lines = [f"N={row.nproc} (load average {row.load:.2f} at the start)"]
    lines.append(
        f"  {'way':<38}{'median':>8}{'p90':>8}{'x stock':>9}{'x hooks':>9}{'rank us':>9}{'driver us':>11}"
    )
    for way, title in WAYS.items():
        if way in skip:
            continue
        lines.append(
            f"  {title:<38}{ms(row.median(way))}{ms(row.p90(way))}{times(row.ratio(way), 9)}"
            f"{times(row.ratio(way, 'hooks') if way in ('core', 'batch') else math.nan, 9)}"
            f"{us(row.rank_cpu(way), 9)}{us(row.driver_cpu(way), 11)}"
        )
        if way in row.notes:
            lines.append(f"    ({row.notes[way]})")
    return lines


def as_json(rows: list[Row], args: argparse.Namespace, about: dict[str, object]) -> str:
    """Every figure, in milliseconds, as one JSON document."""

    def number(value: float, scale: float = 1e3) -> float | None:
        return None if math.isnan(value) else round(value * scale, 4)

    sizes = [
        {
            "nproc": row.nproc,
            "load_average": round(row.load, 2),
            "steps": timed_steps(args, row.nproc),
            "ways": {
                way: {
                    "median_ms": number(row.median(way)),
                    "mean_ms": number(row.mean(way)),
                    "p90_ms": number(row.p90(way)),
                    "ratio_stock": number(row.ratio(way), 1),
                    "rank_cpu_us": number(row.rank_cpu(way), 1e6),
                    "driver_cpu_us": number(row.driver_cpu(way), 1e6),
                    "samples_ms": [round(t * 1e3, 4) for t in row.times.get(way, [])],
                }
                for way in WAYS
                if way not in args.skip
            },
            "notes": row.notes,
        }
        for row in rows
    ]
    return json.dumps({"machine": about, "warmup": WARMUP, "sizes": sizes}, indent=2)


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the table or the JSON (a benchmark: the exit status is 0 either way)."""
    args = parse_args(argv)
    about = machine()
    began = time.perf_counter()
    report = sys.stderr if args.json else sys.stdout
    print(
        f"{about['date']}, {about['usable_cores']} usable cores, {about['platform']}, "
        f"Python {about['python']}, load average {about['load_average']}; "
        f"{steps_said(args)} timed steps per way (+{WARMUP} warm-up), times in ms per step; CPU time "
        "per step in us: of one rank, and of the driver (this process, the core or tmux)",
        file=report,
        flush=True,
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddptui-bench-") as tmp:
        script = os.path.join(tmp, "rank.py")
        with open(script, "w", encoding="utf-8") as out:
            out.write(RANK_SCRIPT)
        for nproc in args.sizes:
            rows.append(measure(nproc, script, tmp, args))
            print("\n".join(table(rows[-1], args.skip)), file=report, flush=True)
    print(
        f"total wall time {time.perf_counter() - began:.1f}s, load average {os.getloadavg()[0]:.2f}",
        file=report,
    )
    if args.json:
        print(as_json(rows, args, about))
    return 0


if __name__ == "__main__":
    sys.exit(main())
