"""Stepping over Python calls: one `n` over a line that makes many calls, with and without ddptui.

pdb traces every call of a Python function while it steps: `n` over `loss = model(x)` runs the
debugger's trace function once for each call the forward pass makes. The rank script loops over
`x = sum(map(f, range(CALLS)))`, `f` being a function of another file (a library's), and each way
steps it with `n`, on ranks of its own, taking turns. `--breakpoint` sets a breakpoint in the
script first (on a line never reached), as `b train.py:N` does: pdb then looks up the file of
every call (the same path as `c` on its way to that breakpoint). The ways:

* stock: stock-pdb ranks, stepped by the bare pty loop of `bench/lockstep.py` (the baseline);
* rankpdb: `python -m ddptui.rank` ranks (RankPdb, no link), the same bare loop;
* core: `Session.broadcast("n")`, as the app and `--batch` step.

A line with few calls is `bench/lockstep.py`'s subject; here the per-call cost shows (the figures
are per step, and per call once the step without calls is taken off: `--calls 0` measures that).
`--json` prints the figures as JSON on standard output (the table goes to standard error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time

from lockstep import BLOCK, TURN_WARMUP, WARMUP, Way, bare_way, core_way, ddptui_ranks, machine, stock_ranks

LIBRARY = """\
def f(i):
    return i + 1
"""
SCRIPT = """\
import pdb

from calls_library import f


def never():
    return 0


debugger = pdb.Pdb()
if {breakpoint}:
    debugger.set_break(debugger.canonic(__file__), 7)
debugger.set_trace()
for i in range(10**9):
    x = sum(map(f, range({calls})))
"""
WAYS = {
    "stock": "stock pdb, bare pty loop",
    "rankpdb": "ddptui.rank ranks, no link, bare loop",
    "core": 'ddptui core, Session.broadcast("n")',
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: calls per line, ranks, timed steps, output format."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20000, help="calls of f on the stepped line (20000)")
    parser.add_argument("--breakpoint", action="store_true", help="set a breakpoint in the script first")
    parser.add_argument("--nproc", type=int, default=1, help="ranks per way (1)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per way (20)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on standard output")
    return parser.parse_args(argv)


async def measure(script: str, tmp: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """Seconds per step of each way, the ways taking turns in blocks on ranks alive side by side."""
    starts = {
        "stock": lambda: asyncio.to_thread(bare_way, stock_ranks(args.nproc, script)),
        "rankpdb": lambda: asyncio.to_thread(bare_way, ddptui_ranks(args.nproc, script, tmp, False)),
        "core": lambda: core_way(args.nproc, script),
    }
    ways: dict[str, Way] = {}
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    try:
        for name, start in starts.items():
            ways[name] = await start()
            for _ in range(WARMUP):
                await ways[name].step()
        while any(len(values) < args.steps for values in times.values()):
            for name, way in ways.items():
                for _ in range(TURN_WARMUP):
                    await way.step()
                for _ in range(min(BLOCK, args.steps - len(times[name]))):
                    times[name].append(await way.step())
    finally:
        for way in ways.values():
            await way.close()
    return times


def main(argv: list[str] | None = None) -> int:
    """Run the ways and print the table (or the JSON)."""
    args = parse_args(argv)
    about = machine()
    load = os.getloadavg()[0]
    report = sys.stderr if args.json else sys.stdout
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="ddptui-bench-") as tmp:
        script = os.path.join(tmp, "rank.py")
        with open(script, "w") as out:
            out.write(SCRIPT.format(calls=args.calls, breakpoint=args.breakpoint))
        with open(os.path.join(tmp, "calls_library.py"), "w") as out:
            out.write(LIBRARY)
        times = asyncio.run(measure(script, tmp, args))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"{about['date']}, {about['usable_cores']} usable cores, {about['platform']}, "
        f"Python {about['python']}, load average {load:.2f}; "
        f"`n` over a line making {args.calls} calls of a library's f, "
        + ("a breakpoint set in the script, " if args.breakpoint else "no breakpoint set, ")
        + f"{args.nproc} rank(s) a way, {args.steps} timed steps",
        file=report,
    )
    print(f"  {'way':<40}{'median ms':>10}{'x stock':>9}", file=report)
    for name, title in WAYS.items():
        print(
            f"  {title:<40}{medians[name] * 1e3:>10.2f}{medians[name] / medians['stock']:>9.2f}", file=report
        )
    print(f"total wall time {time.perf_counter() - began:.1f}s", file=report)
    if args.json:
        figures = {
            name: {
                "median_ms": round(medians[name] * 1e3, 4),
                "ratio_stock": round(medians[name] / medians["stock"], 3),
            }
            for name in WAYS
        }
        print(
            json.dumps(
                {
                    "machine": about,
                    "load_before": load,
                    "calls": args.calls,
                    "breakpoint": args.breakpoint,
                    "nproc": args.nproc,
                    "ways": figures,
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
