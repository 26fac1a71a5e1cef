"""What recording collectives costs: per collective (Flight Recorder, wrappers) and per `collective_log()`.

Runs 2-rank gloo jobs on this machine (two processes, env:// on a free port) and prints:

* per-collective time, median µs per call over blocks of calls, of an all_reduce of 1 and of
  1000 float32 and of a barrier, with the Flight Recorder off (`TORCH_FR_BUFFER_SIZE=0`, the
  baseline), with it on (torch's default, a separate job: the ring is set at init), and with it
  off but ddptui's wrappers installed (same job as the baseline, blocks alternating wrapped/bare
  so drift and load fall on both alike). The ring is full (2000 entries) before timing starts.
  Once with 2 ranks (the latency a job sees; on a loaded 2-core machine a few µs of extra CPU
  can cost far more through scheduling) and once with 1 rank (the recording's own CPU cost,
  without the round trip).
* `collective_log()` time, median ms, against the raw Flight Recorder dump it is built on, with
  10, 100, 1000 and 2000 entries in the ring; the wrappers' log with 2000 records; and the first
  call with stack traces in a process that has not imported `torch._inductor`, with ddptui's guard
  against that import and without it (torch then imports inductor: 850 modules).

Not a test: figures vary with the machine's load (printed).
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

BLOCK = 200
"""Collectives per timed block."""
BLOCKS = 12
"""Timed blocks per case (and per side, for the wrappers)."""
RING = 2000
"""The Flight Recorder's default ring: filled before the per-collective timing."""


# -- inside a rank ------------------------------------------------------------------------------


def per_call(run: Callable[[], None]) -> float:
    """Seconds per call of one block of `run`."""
    start = time.perf_counter()
    for _ in range(BLOCK):
        run()
    return (time.perf_counter() - start) / BLOCK


def median_ms(run: Callable[[], object], times: int = 15) -> float:
    """Median wall time of `run`, in ms."""
    samples = []
    for _ in range(times):
        start = time.perf_counter()
        run()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3


def cases() -> dict[str, Callable[[], None]]:
    """The collectives timed per call."""
    import torch
    import torch.distributed as dist

    one, thousand = torch.ones(1), torch.ones(1000)
    return {
        "all_reduce [1]": lambda: dist.all_reduce(one),
        "all_reduce [1000]": lambda: dist.all_reduce(thousand),
        "barrier": lambda: dist.barrier(),
    }


def fill_to(entries: int) -> None:
    """Issue all_reduces until this rank has issued `entries` collectives in the default group."""
    import torch
    import torch.distributed as dist

    while issued() < entries:
        dist.all_reduce(torch.ones(1))


def issued() -> int:
    """Collectives this rank issued in the default group (the group's own counter)."""
    import torch.distributed as dist

    count: int = getattr(dist.group.WORLD, "_get_sequence_number_for_group")()  # noqa: B009 (untyped)
    return count


def bindings() -> Any:
    """torch's C++ c10d bindings, with the Flight Recorder's dump functions (untyped)."""
    return sys.modules["torch._C._distributed_c10d"]


def dump_costs(results: dict[str, Any]) -> None:
    """collective_log() against the raw dumps, at growing ring sizes (rank 0 measures, rank 1 waits)."""
    import torch.distributed as dist

    from ddptui.rank.collectives import collective_log
    from ddptui.rank.flight_recorder import _inductor_left_unimported

    c10d = bindings()

    for entries in (10, 100, 1000, RING):
        fill_to(entries)
        dist.barrier()
        if dist.get_rank() == 0:
            with _inductor_left_unimported() as stacks:
                raw = median_ms(lambda: pickle.loads(c10d._dump_fr_trace(includeStackTraces=stacks)))
            results[f"dump {entries}"] = {
                "log": median_ms(collective_log),
                "last 50": median_ms(lambda: collective_log(50)),
                "raw pickle": raw,
                "raw json": median_ms(lambda: json.loads(c10d._dump_fr_trace_json())),
            }
        dist.barrier()


def first_call(results: dict[str, Any]) -> None:
    """The first dump with stacks, guarded then not (the unguarded one imports torch._inductor)."""
    from ddptui.rank.collectives import collective_log

    c10d = bindings()

    results["inductor imported before"] = "torch._inductor" in sys.modules
    start = time.perf_counter()
    collective_log()
    results["first log ms"] = (time.perf_counter() - start) * 1e3
    start = time.perf_counter()
    c10d._dump_fr_trace(includeStackTraces=True)
    results["unguarded ms"] = (time.perf_counter() - start) * 1e3


def rank_main(mode: str) -> None:
    """One rank of a bench job; rank 0 prints its results as one JSON line."""
    import torch.distributed as dist

    from ddptui.rank import collectives

    dist.init_process_group("gloo", init_method="env://")
    results: dict[str, Any] = {"mode": mode}
    if mode == "recorder" and dist.get_world_size() > 1:
        fill_to(10)
        first_call(results)
        dump_costs(results)
    fill_to(RING + 100)
    for name, run in cases().items():
        bare, wrapped = [], []
        for _ in range(BLOCKS):
            bare.append(per_call(run))
            if mode == "off":
                collectives.install_wrappers()
                wrapped.append(per_call(run))
                collectives.uninstall_wrappers()
        results[name] = {"bare": statistics.median(bare) * 1e6}
        if wrapped:
            results[name]["wrapped"] = statistics.median(wrapped) * 1e6
    if mode == "off" and dist.get_world_size() > 1:
        collectives.install_wrappers()
        fill_to(issued() + RING)
        results["wrappers log ms"] = median_ms(collectives.collective_log)
    if dist.get_rank() == 0:
        print(json.dumps(results), flush=True)
    dist.barrier()
    dist.destroy_process_group()


# -- the launcher -------------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job(mode: str, world: int = 2) -> dict[str, Any]:
    """Run a job of `world` ranks in `mode` (`off`: recorder off, wrappers timed; `recorder`: on) and
    read rank 0's results.
    """
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE=str(world))
    env.update(OMP_NUM_THREADS="1")
    env.pop("TORCH_FR_BUFFER_SIZE", None)
    if mode == "off":
        env["TORCH_FR_BUFFER_SIZE"] = "0"
    argv = [sys.executable, __file__, "--rank", mode]
    ranks = [
        subprocess.Popen(argv, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, text=True)
        for r in range(world)
    ]
    try:
        out, _ = ranks[0].communicate(timeout=600)
        for rank in ranks[1:]:
            rank.wait(60)
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def report(off: dict[str, Any], on: dict[str, Any], off1: dict[str, Any], on1: dict[str, Any]) -> list[str]:
    """The tables and the first-call line."""
    lines = [*per_collective("2 ranks", off, on), "", *per_collective("1 rank: CPU cost", off1, on1)]
    lines += [
        "",
        "collective_log(): median ms against the raw dump",
        f"{'entries':<9}{'log':>8}{'last 50':>9}{'pickle':>9}{'ratio':>7}{'json':>8}",
    ]
    for key in sorted((k for k in on if k.startswith("dump ")), key=lambda k: int(k.split()[1])):
        d = on[key]
        lines.append(
            f"{key.split()[1]:<9}{d['log']:>8.2f}{d['last 50']:>9.2f}{d['raw pickle']:>9.2f}"
            f"{d['log'] / d['raw pickle']:>7.2f}{d['raw json']:>8.2f}"
        )
    lines += [
        f"wrappers' log, {RING} records: {off['wrappers log ms']:.2f} ms",
        f"first call with stacks (torch._inductor imported before: {on['inductor imported before']}): "
        f"{on['first log ms']:.1f} ms guarded,",
        f"  {on['unguarded ms']:.0f} ms unguarded (torch imports torch._inductor)",
    ]
    return lines


def per_collective(title: str, off: dict[str, Any], on: dict[str, Any]) -> list[str]:
    """Median µs per call: none, recorder, wrappers, with ratios to none."""
    lines = [
        f"per collective, {title}: median µs per call (gloo, ring full)",
        f"{'op':<20}{'none':>9}{'recorder':>11}{'ratio':>7}{'wrappers':>11}{'ratio':>7}",
    ]
    for name in cases_names():
        none, fr, wrapped = off[name]["bare"], on[name]["bare"], off[name]["wrapped"]
        lines.append(
            f"{name:<20}{none:>9.1f}{fr:>11.1f}{fr / none:>7.2f}{wrapped:>11.1f}{wrapped / none:>7.2f}"
        )
    return lines


def cases_names() -> list[str]:
    """Names of the timed collectives, without importing torch in the launcher."""
    return ["all_reduce [1]", "all_reduce [1000]", "barrier"]


def main() -> None:
    """Run the jobs and print the tables."""
    if sys.argv[1:2] == ["--rank"]:
        rank_main(sys.argv[2])
        return
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores; 4 jobs...", flush=True)
    off, on = job("off"), job("recorder")
    off1, on1 = job("off", world=1), job("recorder", world=1)
    print("\n".join(report(off, on, off1, on1)))
    print(f"load average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
