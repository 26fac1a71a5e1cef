"""Summary speed: `summarize()` on big values, against a baseline on the same value in the same run.

`summarize` runs in a paused rank for every `eval` and `:compare`, so it must stay cheap on
whatever the user points it at. For each value the bench prints the median of a few runs of
`summarize(value)` and of a baseline:

* tensors: one `t.sum()`, a single read of the data (the floor for anything that looks at every
  element; the summary reads it about four times: aminmax, sum, norm, and a hash or word sum);
* the string and the list: the builtin `repr(value)`, which is what pdb's `p` builds.

Torch runs on one thread (`--threads`), as ranks do under ddptui's `OMP_NUM_THREADS=1`. The
targets: a 1e8-element float32 tensor well under 1 s, a 10 MB string and a list of 10M ints well
under 0.1 s.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from ddptui.rank.summary import summarize


def median_seconds(action: Callable[[], object], runs: int) -> float:
    """Median wall time of `runs` calls of `action`, after one untimed warm-up."""
    action()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def report(label: str, value: Any, baseline: Callable[[], object], runs: int) -> None:
    """Print one line: summary time, baseline time, their ratio."""
    ours = median_seconds(lambda: summarize(value), runs)
    base = median_seconds(baseline, runs)
    print(
        f"{label:34s} summarize {ours * 1000:8.1f} ms   baseline {base * 1000:8.1f} ms   x{ours / base:6.2f}"
    )


def tensors(torch: Any, runs: int) -> None:
    """Float32 tensors of 1e3, 1e6 and 1e8 elements; the 1e8 one also with a NaN and transposed."""
    for size in (10**3, 10**6, 10**8):
        value = torch.randn(size)
        report(f"tensor float32 {size:.0e}", value, value.sum, runs)
    value[12345] = float("nan")
    report("tensor float32 1e+08, one NaN", value, value.sum, runs)
    square = value.view(10**4, 10**4).T
    report("tensor float32 1e+08, transposed", square, square.sum, max(runs // 2, 1))


def main() -> None:
    """Run every case and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="torch threads (ranks run with 1)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per case")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} cores, torch threads {args.threads}")
    text = "x" * (10 * 1024 * 1024)
    report("str of 10 MiB", text, lambda: repr(text), args.runs)
    numbers = list(range(10_000_000))
    report("list of 10M ints", numbers, lambda: repr(numbers), max(args.runs // 2, 1))
    try:
        import torch
    except ImportError:
        print("torch not installed: tensor cases skipped")
        return
    torch.set_num_threads(args.threads)
    tensors(torch, args.runs)


if __name__ == "__main__":
    main()
