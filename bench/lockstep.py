"""Lockstep latency: one `n` broadcast to N paused ranks through ddptui, against a bare pty loop.

For each job size N (default 4, 16, 64) the bench starts a ddptui `Session` of N plain-Python
ranks (no torch) that stop at `breakpoint()` and then loop over trivial lines, so every `n`
steps one line and pauses again. It times two ways of doing the same step on the same ranks:

* ddptui: `await session.broadcast("n")`, from the call until it returns (every rank is back
  at its prompt, as the side channel and the prompt bytes on the pty both say);
* bare: a plain `selectors` loop that writes `n\\r` to every rank's pty and reads each pty until
  its new output ends with that rank's prompt `(Pdb rN) ` (trailing escapes stripped).

The bare loop runs on the session's own ptys (the session's readers are detached from the event
loop meanwhile and attached again after), so process count and CPU contention are the same on
both sides. After a few warm-up steps of each, the timed steps run in blocks of five, ordered
ddptui/bare, bare/ddptui, ddptui/bare, ..., so warm-up, drift and other load on the machine fall
on both sides alike (the load average is printed: on a busy machine, run it again).

How to read it: `ratio` is the median ddptui step over the median bare step, i.e. what the
debugger's bookkeeping (side channel, state callbacks, waiting, stall watch) costs on top of the
ranks' own work and the pty round trip. The target is a ratio of at most 1.5 at every size.
Ctrl-C stops the bench between steps and ends every rank.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import selectors
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from ddptui.core.launch import LaunchSpec
from ddptui.core.rank import Rank
from ddptui.core.session import Session
from ddptui.core.state import Phase

TARGET = 1.5
"""The issue's bar: median ddptui step / median bare step."""
WARMUP = 3
"""Untimed steps of each kind before the timed blocks."""
BLOCK = 5
"""Timed steps per block: short blocks, so background load falls on both sides alike."""
STEP_TIMEOUT = 60.0
"""Seconds a bare step may take before the bench gives up."""
RANK_SCRIPT = '''\
"""A plain-Python rank for bench/lockstep.py: stop, then step over trivial lines for ever."""

breakpoint()
for i in range(10**9):
    x = i
    y = x + 1
'''
_TRAILING_ESCAPES = re.compile(rb"(?:\x1b\[[0-?]*[ -/]*[@-~]|\x1b[=>])*\Z")
STOP = threading.Event()
"""Set by Ctrl-C; the bench stops between steps, so the session always gets closed."""


class Interrupted(Exception):
    """Ctrl-C was pressed: the bench stops between steps instead of cancelling a broadcast."""


@dataclass
class Row:
    """The timings of one job size, in seconds per step."""

    nproc: int
    ddptui: list[float]
    bare: list[float]
    startup: float

    @property
    def ratio(self) -> float:
        """Median ddptui step over median bare step."""
        return statistics.median(self.ddptui) / statistics.median(self.bare)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: job sizes and timed steps per size."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16,64", help="comma-separated rank counts (4,16,64)")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per side and size (30)")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if args.steps < 2 or not args.sizes or min(args.sizes) < 1:
        parser.error("need --steps >= 2 and rank counts >= 1")
    return args


def check_stop() -> None:
    """Raise Interrupted once Ctrl-C was pressed."""
    if STOP.is_set():
        raise Interrupted


def p90(values: list[float]) -> float:
    """The 90th percentile."""
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


# -- ddptui side -----------------------------------------------------------------------------
async def ddptui_steps(session: Session, steps: int) -> list[float]:
    """Time `steps` lockstep `n` broadcasts."""
    times = []
    for _ in range(steps):
        check_stop()
        began = time.perf_counter()
        result = await session.broadcast("n")
        times.append(time.perf_counter() - began)
        lost = [r.rank for r in result.replies if r.state.phase is not Phase.PAUSED] + list(result.skipped)
        if lost or len(result.replies) != len(session.ranks):
            raise RuntimeError(f"ranks {lost} did not come back to a prompt")
    return times


# -- bare side -------------------------------------------------------------------------------
def at_prompt(data: bytes, prompt: bytes) -> bool:
    """True when `data`, trailing escape sequences stripped, ends with `prompt`."""
    return data[: _TRAILING_ESCAPES.search(data).start()].endswith(prompt)  # type: ignore[union-attr]


def drain(fd: int) -> bytes:
    """Read what a non-blocking pty has right now."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 65536)
        except (BlockingIOError, OSError):
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def bare_step(ranks: list[Rank], selector: selectors.BaseSelector) -> float:
    """Write `n` to every pty, read each until its prompt is back; the wall time taken."""
    check_stop()
    began = time.perf_counter()
    new = {rank.fd: bytearray() for rank in ranks}
    for rank in ranks:
        os.write(rank.fd, b"n\r")
    pending = {rank.fd: rank.prompt for rank in ranks}
    while pending:
        events = selector.select(STEP_TIMEOUT)
        if not events:
            raise RuntimeError(f"bare step: {len(pending)} ranks never showed their prompt")
        for key, _ in events:
            new[key.fd] += drain(key.fd)
            if key.fd in pending and at_prompt(bytes(new[key.fd]), pending[key.fd]):
                del pending[key.fd]
    return time.perf_counter() - began


async def bare_steps(session: Session, steps: int) -> list[float]:
    """Time `steps` bare steps on the session's ptys, its readers detached meanwhile."""
    loop = asyncio.get_running_loop()
    ranks = session.ranks
    paused = {rank.index: rank.paused_count for rank in ranks}
    with selectors.DefaultSelector() as selector:
        for rank in ranks:
            loop.remove_reader(rank.fd)
            drain(rank.fd)
            selector.register(rank.fd, selectors.EVENT_READ)
        try:
            times = [bare_step(ranks, selector) for _ in range(steps)]
        finally:
            for rank in ranks:
                loop.add_reader(rank.fd, session._drain, rank)
    await catch_up(session, {index: count + steps for index, count in paused.items()})
    return times


async def catch_up(session: Session, paused: dict[int, int]) -> None:
    """Let the session read the side-channel events of the bare steps before it broadcasts again."""
    caught_up = await session.wait_until(
        lambda: all(rank.paused_count >= paused[rank.index] for rank in session.ranks), STEP_TIMEOUT
    )
    if not caught_up:
        raise RuntimeError("the session missed `paused` events of the bare steps")
    await session.wait_settled()


# -- one job size ----------------------------------------------------------------------------
def blocks(steps: int) -> list[int]:
    """Block sizes adding up to `steps`; the sides alternate ddptui/bare, bare/ddptui, ..."""
    return [min(BLOCK, steps - start) for start in range(0, steps, BLOCK)]


async def start(session: Session) -> None:
    """Start the ranks and wait until each is at its first prompt."""
    await session.start()
    await session.wait_settled()
    not_paused = [r.index for r in session.ranks if r.state.phase is not Phase.PAUSED]
    if not_paused:
        raise RuntimeError(f"ranks {not_paused} never reached their first prompt")


async def measure(nproc: int, steps: int, script: str) -> Row:
    """Start N ranks, warm both sides up, then time them in alternating blocks."""
    began = time.perf_counter()
    session = Session(LaunchSpec(target=script, nproc=nproc, stall_timeout=60))
    try:
        await start(session)
        startup = time.perf_counter() - began
        await ddptui_steps(session, WARMUP)
        await bare_steps(session, WARMUP)
        ddptui: list[float] = []
        bare: list[float] = []
        for block, size in enumerate(blocks(steps)):
            sides = [(ddptui, ddptui_steps), (bare, bare_steps)]
            for times, side in sides if block % 2 == 0 else sides[::-1]:
                times += await side(session, size)
        return Row(nproc, ddptui, bare, startup)
    finally:
        await session.close()


# -- report ----------------------------------------------------------------------------------
def machine() -> str:
    """One line about where the bench ran."""
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return (
        f"machine: {usable} usable cores ({os.cpu_count()} online), {platform.machine()}, "
        f"{platform.system()} {platform.release()}, Python {platform.python_version()}, {load()}"
    )


def load() -> str:
    """The 1-minute load average, to tell a quiet machine from a busy one."""
    return f"load average {os.getloadavg()[0]:.2f}"


def header() -> str:
    """The table's column titles."""
    return (
        f"{'N':>4}  {'ddptui med':>10}  {'p90':>8}  {'bare med':>10}  {'p90':>8}"
        f"  {'ratio':>6}  {'<= ' + str(TARGET):>7}  {'startup':>8}"
    )


def line(row: Row) -> str:
    """One table row, in milliseconds."""
    ok = "yes" if row.ratio <= TARGET else "NO"
    return (
        f"{row.nproc:>4}  {statistics.median(row.ddptui) * 1e3:>10.2f}  {p90(row.ddptui) * 1e3:>8.2f}"
        f"  {statistics.median(row.bare) * 1e3:>10.2f}  {p90(row.bare) * 1e3:>8.2f}"
        f"  {row.ratio:>6.2f}  {ok:>7}  {row.startup:>7.1f}s"
    )


def verdict(rows: list[Row]) -> str:
    """Whether the target holds at every size, and where it does not."""
    missed = ",".join(str(row.nproc) for row in rows if row.ratio > TARGET)
    return f"ratio <= {TARGET} at every size: " + (f"no, missed at N={missed}" if missed else "yes")


async def run(sizes: list[int], steps: int) -> list[Row]:
    """Measure every size in turn, printing each row as it is done."""
    asyncio.get_running_loop().add_signal_handler(signal.SIGINT, STOP.set)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddptui-bench-") as tmp:
        script = os.path.join(tmp, "rank.py")
        with open(script, "w", encoding="utf-8") as out:
            out.write(RANK_SCRIPT)
        for nproc in sizes:
            rows.append(await measure(nproc, steps, script))
            print(line(rows[-1]), flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the bench and print the table (a benchmark: the exit status is 0 either way)."""
    args = parse_args(argv)
    began = time.perf_counter()
    print(machine())
    print(
        f"steps: {args.steps} timed `n` per side and size (+{WARMUP} warm-up), alternating blocks of {BLOCK}"
    )
    print("bare: same ranks and ptys, the session's pty readers detached; times in ms per step")
    print(header(), flush=True)
    try:
        rows = asyncio.run(run(args.sizes, args.steps))
    except (Interrupted, KeyboardInterrupt):
        print("interrupted (every rank was ended)", file=sys.stderr)
        return 130
    print(verdict(rows))
    print(f"total wall time: {time.perf_counter() - began:.1f}s, {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
