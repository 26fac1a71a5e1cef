"""What recording point-to-point ops costs, per op, against the bare torch.distributed functions.

Runs a 2-rank gloo job on this machine (env:// on a free port). Rank 0 sends, rank 1 receives, in
blocks of calls that alternate bare and wrapped (`ddptui.rank.p2p` installed) so load and drift
fall on both alike, and prints µs per op, for:

* `send`/`recv` of 1 float32 (blocking), `isend`/`irecv` + `wait()`, and a `batch_isend_irecv`
  of one send and one recv each way (per op: the batch's time over its 2 ops): the median wall
  time (the latency a job sees) and the least CPU time of rank 0's main thread (gloo's own
  threads left out);
* the wrappers' own cost apart from gloo: a wrapped no-op `isend` against the bare no-op, called
  from a user frame and from 10 library frames deep (the walk to the user's call site), least
  CPU time.

CPU time stands up to other processes' load far better than wall time on a shared machine; both
still vary (the load average is printed). Not a test.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

BLOCK = 200
"""Ops per timed block."""
BLOCKS = 15
"""Timed blocks per case and side."""


def per_op(run: Callable[[], None], ops: int = 1) -> tuple[float, float]:
    """Wall and CPU microseconds per op of one block of `run` (each run doing `ops` ops)."""
    wall, cpu = time.perf_counter(), time.thread_time()
    for _ in range(BLOCK):
        run()
    scale = 1e6 / BLOCK / ops
    return (time.perf_counter() - wall) * scale, (time.thread_time() - cpu) * scale


def cases(rank: int) -> dict[str, tuple[Callable[[], None], int]]:
    """The timed cases of one rank: name -> (one run, ops per run)."""
    import torch
    import torch.distributed as dist

    t, other = torch.ones(1), 1 - rank

    def blocking() -> None:
        """One send on rank 0, its recv on rank 1."""
        (dist.send if rank == 0 else dist.recv)(t, other)

    def async_op() -> None:
        """One isend on rank 0, its irecv on rank 1, each waited on."""
        (dist.isend if rank == 0 else dist.irecv)(t, other).wait()

    def batch() -> None:
        """A send and a recv each way, in one batch."""
        ops = [dist.P2POp(dist.isend, t, other), dist.P2POp(dist.irecv, torch.zeros(1), other)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    return {"send/recv": (blocking, 1), "isend/irecv+wait": (async_op, 1), "batch_isend_irecv": (batch, 2)}


def rank_main() -> None:
    """One rank of the job; rank 0 prints its results as one JSON line."""
    import torch.distributed as dist

    from ddptui.rank import p2p

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    results: dict[str, Any] = {}
    for name, (run, ops) in cases(rank).items():
        bare, wrapped = [], []
        for _ in range(BLOCKS):
            bare.append(per_op(run, ops))
            p2p.install()
            wrapped.append(per_op(run, ops))
            p2p.uninstall()
            p2p.forget()
        results[f"{name} (wall)"] = {"bare": median(bare, 0), "wrapped": median(wrapped, 0)}
        results[f"{name} (cpu)"] = {"bare": least(bare, 1), "wrapped": least(wrapped, 1)}
    if rank == 0:
        results.update(cpu_cost())
        print(json.dumps(results), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def median(samples: list[tuple[float, float]], which: int) -> float:
    """The median of one kind of time (0: wall, 1: CPU)."""
    return statistics.median(sample[which] for sample in samples)


def least(samples: list[tuple[float, float]], which: int) -> float:
    """The least of one kind of time (0: wall, 1: CPU)."""
    return min(sample[which] for sample in samples)


def cpu_cost() -> dict[str, dict[str, float]]:
    """The wrapper around a no-op `isend`, from a user frame and from 10 library frames deep."""
    import torch

    from ddptui.rank import p2p

    def isend(
        tensor: Any, dst: int | None = None, group: Any = None, tag: int = 0, group_dst: Any = None
    ) -> None:
        """Does nothing, with torch's signature."""

    wrapped = p2p._wrap_op("isend", isend)
    t = torch.ones(1)
    deep = compile(
        "def deep(n, f):\n    return f() if n == 0 else deep(n - 1, f)\n", "/usr/lib/python3/x.py", "exec"
    )
    space: dict[str, Any] = {}
    exec(deep, space)  # frames that look like a library's, between the user and the op
    callers: dict[str, Callable[[Callable[..., None]], None]] = {
        "user frame": lambda f: f(t, 1),
        "10 frames deep": lambda f: space["deep"](10, lambda: f(t, 1)),
    }
    found = {}
    for name, call in callers.items():
        bare = [per_op(functools.partial(call, isend)) for _ in range(BLOCKS)]
        timed = [per_op(functools.partial(call, wrapped)) for _ in range(BLOCKS)]
        p2p.forget()
        found[f"no-op isend, {name} (cpu)"] = {"bare": least(bare, 1), "wrapped": least(timed, 1)}
    return found


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def job() -> dict[str, Any]:
    """Run the 2-rank job and read rank 0's results."""
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2")
    env.update(OMP_NUM_THREADS="1")
    argv = [sys.executable, __file__, "--rank"]
    ranks = [
        subprocess.Popen(argv, env=dict(env, RANK=str(r)), stdout=subprocess.PIPE, text=True) for r in (0, 1)
    ]
    try:
        out, _ = ranks[0].communicate(timeout=600)
        ranks[1].wait(60)
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def main() -> None:
    """Run the job and print one line per case."""
    results = job()
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}; µs per op, {BLOCKS} blocks of {BLOCK}: wall the median, cpu the least")
    print(f"{'case':<32}{'bare':>9}{'wrapped':>9}{'extra':>8}{'ratio':>7}")
    for name, times in results.items():
        bare, wrapped = times["bare"], times["wrapped"]
        print(f"{name:<32}{bare:>9.2f}{wrapped:>9.2f}{wrapped - bare:>8.2f}{wrapped / bare:>7.2f}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--rank"]:
        rank_main()
    else:
        main()
