"""What `:stacks` costs: sampling every rank's stack, per rank, at 4 and 16 ranks.

Three jobs, each started through `Session` like ddptui starts them, stall watch off:

* plain N (default 4 and 16): plain-Python ranks asleep a few calls deep (`time.sleep`, the GIL
  released), the running-or-waiting case `:stacks` samples;
* torch 4: a 4-rank gloo job where ranks 0-2 wait in an all_reduce rank 3 never joins (torch's
  Flight Recorder on, its default), the hang `:stacks` is for.

For each it times, as medians (p90) over `--samples` runs, taking turns in blocks so drift falls
on all alike:

* ask 1: one `stack` request to one rank, the round trip through the rank link (the baseline);
* sample: `sample(session)`, every rank at once (ratio: over `ask 1`; per rank: over N);
* merged: `merged(session)`, the sample plus each waiting rank's last collective (`:stacks`);
* merge: `merge` + `render` alone on the sampled stacks, in the core (no rank involved);
* dump: one faulthandler dump (`stack_dump`), the fallback for a rank that cannot answer;
* rank CPU: CPU the ranks spent per rank per sample (psutil), minus what they spent over an
  equally long idle wait (the job's own background), in µs.

Not a test: figures vary with the machine's load (printed).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import psutil

from ddptui.core.diagnosis.stack_tree import merge, merged, render, sample
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.rank.asks import Stack
from ddptui.rank.protocol import Frame

BLOCK = 5
"""Timed runs per way per block."""
GAP = 0.05
"""Seconds between two timed runs: `:stacks` is typed, and back to back, 16 ranks still ending the
last request's threads on 2 cores would be timed as well."""
START_TIMEOUT = 120.0
"""Seconds a job may take to reach the state it is sampled in."""
PLAIN = """\
import time


def inner():
    time.sleep(3600)


def outer():
    inner()


outer()
"""
TORCH = """\
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
dist.all_reduce(torch.ones(3))
if dist.get_rank() == 3:
    time.sleep(3600)
dist.all_reduce(torch.ones(3))
"""
WAYS = ("ask 1", "sample", "merged", "merge", "dump")


@dataclass
class Row:
    """The figures of one job: seconds per run of each way, and the ranks' CPU per sample."""

    job: str
    nproc: int
    times: dict[str, list[float]] = field(default_factory=dict)
    cpu_us: float = float("nan")
    """CPU µs per rank per `sample`, the idle background subtracted."""

    def median(self, way: str) -> float:
        """Median seconds of a way."""
        return statistics.median(self.times[way])

    def p90(self, way: str) -> float:
        """90th percentile seconds of a way."""
        values = self.times[way]
        return statistics.quantiles(values, n=10, method="inclusive")[-1] if len(values) > 1 else values[0]


async def timed(run: Callable[[], Awaitable[object]]) -> float:
    """Wall seconds of one awaited run, after a pause that lets the ranks finish the last one."""
    await asyncio.sleep(GAP)
    began = time.perf_counter()
    await run()
    return time.perf_counter() - began


def rank_cpu(session: Session) -> float:
    """CPU seconds (user + system) the ranks' processes have used so far."""
    total = 0.0
    for rank in session.ranks:
        try:
            times = psutil.Process(rank.transport.pid).cpu_times()  # type: ignore[attr-defined]
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


async def ready(session: Session, job: str) -> None:
    """Wait until every rank stands where the job leaves it: asleep, or in the hang."""

    def placed(stacks: dict[int, list[Frame]]) -> bool:
        funcs = [frames[-1].func for frames in stacks.values()]
        if job == "torch":
            return funcs[:3] == ["all_reduce"] * 3 and funcs[3] == "<module>"
        return all(func == "inner" for func in funcs)

    deadline = time.monotonic() + START_TIMEOUT
    while not placed(await sample(session)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{job} ranks did not get where they should: {await sample(session)}")
        await asyncio.sleep(0.2)


async def measure(row: Row, script: str, samples: int) -> None:
    """Start the job, time every way in turns, measure the ranks' CPU, end it."""
    session = Session(LaunchSpec(target=script, nproc=row.nproc, stall_timeout=3600))
    try:
        await session.start()
        await ready(session, row.job)
        stacks = await sample(session)

        async def merge_only() -> list[str]:
            return render(merge(stacks))

        ways: dict[str, Callable[[], Awaitable[object]]] = {
            "ask 1": lambda: session.ask(Stack(), [0]),
            "sample": lambda: sample(session),
            "merged": lambda: merged(session),
            "merge": merge_only,
            "dump": lambda: session.ranks[0].transport.stack_dump(),
        }
        for way in ways:  # warm up
            await ways[way]()
        for start in range(0, samples, BLOCK):
            for way, run in ways.items():
                count = min(BLOCK, samples - start) if way != "dump" else 1
                row.times.setdefault(way, []).extend([await timed(run) for _ in range(count)])
        row.cpu_us = await cpu_per_sample(session, samples)
    finally:
        await session.close()


async def cpu_per_sample(session: Session, samples: int) -> float:
    """The ranks' CPU per rank per `sample`, in µs, less their CPU over an idle wait as long."""
    before = rank_cpu(session)
    began = time.perf_counter()
    for _ in range(samples):
        await asyncio.sleep(GAP)
        await sample(session)
    busy, wall = rank_cpu(session) - before, time.perf_counter() - began
    before = rank_cpu(session)
    await asyncio.sleep(wall)
    idle = rank_cpu(session) - before
    return (busy - idle) / samples / len(session.ranks) * 1e6


def table(rows: list[Row]) -> list[str]:
    """The figures as aligned lines."""
    head = (
        f"{'job':<10}{'ranks':>6}  {'ask 1 ms':>14}  {'sample ms':>14}  {'per rank':>9}  {'ratio':>6}"
        f"  {'merged ms':>14}  {'merge ms':>9}  {'dump ms':>8}  {'rank CPU µs':>11}"
    )
    lines = [head]
    for row in rows:

        def cell(way: str, row: Row = row) -> str:
            return f"{row.median(way) * 1e3:6.2f} ({row.p90(way) * 1e3:5.2f})"

        ratio = row.median("sample") / row.median("ask 1")
        lines.append(
            f"{row.job:<10}{row.nproc:>6}  {cell('ask 1'):>14}  {cell('sample'):>14}"
            f"  {row.median('sample') * 1e3 / row.nproc:9.3f}  {ratio:6.1f}"
            f"  {cell('merged'):>14}  {row.median('merge') * 1e3:9.3f}  {row.median('dump') * 1e3:8.1f}"
            f"  {row.cpu_us:11.0f}"
        )
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Job sizes for the plain ranks, timed samples per way, whether to run the torch job."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4,16", help="plain-Python job sizes (4,16)")
    parser.add_argument("--samples", type=int, default=40, help="timed runs per way and job (40)")
    parser.add_argument("--no-torch", action="store_true", help="leave out the 4-rank torch job")
    args = parser.parse_args(argv)
    args.sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if args.samples < 2 or not args.sizes or min(args.sizes) < 1:
        parser.error("need --samples >= 2 and job sizes >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    """Run every job, print the table."""
    args = parse_args(argv)
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", file=sys.stderr, flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ddptui-bench-stacks-") as tmp:
        jobs = [("plain", size, PLAIN) for size in args.sizes]
        jobs += [] if args.no_torch else [("torch", 4, TORCH)]
        for job, nproc, source in jobs:
            script = os.path.join(tmp, f"{job}_ranks.py")  # not torch.py: it would shadow torch
            with open(script, "w") as out:
                out.write(source)
            print(f"{job} x{nproc}...", file=sys.stderr, flush=True)
            row = Row(job, nproc)
            asyncio.run(measure(row, script, args.samples))
            rows.append(row)
    print("\n".join(table(rows)))
    print(f"medians (p90); ratio = sample / ask 1; load average {os.getloadavg()[0]:.2f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
