"""pdb's trace function, in process: stock `pdb.Pdb` against ddptui's `RankPdb`, no terminal.

While pdb steps, Python calls its trace function at every call of a Python function and at every
line of a traced frame. Two cases, each timed in a fresh subprocess per debugger (RankPdb
installed only in its own), commands read from a string, output to /dev/null:

* `r` out of a function whose loop runs LOOP times (two line events an iteration);
* `n` over a line that calls a function LOOP times (a call event each).

`bench/step_over.py` times the second through real ranks and ptys; this one isolates the trace
function's cost from the terminal round trip. `--json` prints the figures on standard output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

CHILD = """\
import io, json, os, statistics, sys, time, pdb

which, loop, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if which == "rankpdb":
    from ddptui.rank import opening

    opening.install()
out = open(os.devnull, "w")


def f(i):
    return i


def looping(debugger):
    debugger.set_trace()
    total = 0
    for i in range(loop):
        total += i
    return total


def calling(debugger):
    debugger.set_trace()
    return sum(map(f, range(loop)))


figures = {}
for name, case, commands in (("r out of a loop", looping, "r\\nc\\n"), ("n over calls", calling, "n\\nc\\n")):
    times = []
    for _ in range(runs):
        debugger = pdb.Pdb(stdin=io.StringIO(commands), stdout=out)
        began = time.perf_counter()
        case(debugger)
        times.append(time.perf_counter() - began)
    figures[name] = statistics.median(times)
print(json.dumps(figures))
"""


def run(which: str, loop: int, runs: int) -> dict[str, float]:
    """The child's medians, in seconds, for one debugger."""
    done = subprocess.run(
        [sys.executable, "-c", CHILD, which, str(loop), str(runs)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    figures: dict[str, float] = json.loads(done.stdout)
    return figures


def main(argv: list[str] | None = None) -> int:
    """Run both debuggers (alternating, `--rounds` times) and print the table (or the JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loop", type=int, default=20000, help="iterations / calls (20000)")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per case and child (20)")
    parser.add_argument("--rounds", type=int, default=3, help="children per debugger, alternating (3)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on standard output")
    args = parser.parse_args(argv)
    medians: dict[str, dict[str, list[float]]] = {"stock": {}, "rankpdb": {}}
    for _ in range(args.rounds):
        for which in medians:
            for case, value in run(which, args.loop, args.runs).items():
                medians[which].setdefault(case, []).append(value)
    report = sys.stderr if args.json else sys.stdout
    print(f"{args.loop} iterations / calls; median of {args.rounds} children x {args.runs} runs", file=report)
    print(f"  {'case':<20}{'stock pdb ms':>14}{'RankPdb ms':>12}{'x stock':>9}", file=report)
    figures = {}
    for case in medians["stock"]:
        stock = statistics.median(medians["stock"][case])
        ours = statistics.median(medians["rankpdb"][case])
        figures[case] = {"stock_ms": round(stock * 1e3, 3), "rankpdb_ms": round(ours * 1e3, 3)}
        print(f"  {case:<20}{stock * 1e3:>14.2f}{ours * 1e3:>12.2f}{ours / stock:>9.2f}", file=report)
    if args.json:
        print(json.dumps({"loop": args.loop, "cases": figures}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
