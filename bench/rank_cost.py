"""What one lockstep step costs a rank, in machine instructions: stock pdb against ddptui's rank.

With more ranks than cores a lockstep step takes about (N x one rank's CPU + the core's) / cores
(`bench/lockstep.py` prints both), so a rank's cost counts N times. Timings of it move by 5-10 %
from run to run on a shared machine; instruction counts do not (0.1 % in one environment): each
way runs one rank under valgrind (`--tool=cachegrind --cache-sim=no`) in a real pty, stepped with
`n` by a bare loop, twice (S1 and S2 steps); the difference over S2 - S1 is one step's
instructions, start-up and exit taken out. Ways:

* stock: `python rank.py`, stock pdb reading through readline, as in tmux;
* stock-plain: stock pdb with `use_rawinput = 0` (plain lines from stdin), the lightest pdb;
* ddptui: `python -m ddptui.rank rank.py` as the core starts it (plain lines until a key is
  typed in its pane, its link connected to a socket that drops what it sends).

Needs valgrind (`apt-get install valgrind`); without it, says so and exits 0. `--json` prints
the figures on standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

import lockstep
from lockstep import STOCK_PROMPT, PtyRanks, bench_env

from ddptui.rank.protocol import (
    PLAIN_INPUT_ENV,
    PLAIN_UNTIL_EDITED,
    RANK_ENV,
    SOCKET_ENV,
    STATE_DIR_ENV,
    TOKEN_ENV,
)

HEADS = {
    "stock": "import pdb\n\npdb.Pdb().set_trace()\n",
    "stock-plain": "import pdb\n\ndebugger = pdb.Pdb()\ndebugger.use_rawinput = 0\ndebugger.set_trace()\n",
    "ddptui": "import pdb\n\npdb.Pdb().set_trace()\n",
}
TITLES = {
    "stock": "stock pdb (readline)",
    "stock-plain": "stock pdb, plain lines",
    "ddptui": "ddptui rank (as the core runs it)",
}


def cachegrind(counts: str) -> list[str]:
    """The valgrind command line that counts instructions only, into `counts`."""
    return ["valgrind", "--tool=cachegrind", "--cache-sim=no", f"--cachegrind-out-file={counts}"]


def counted(counts: str) -> int:
    """The instructions a finished cachegrind run counted, from its output file."""
    with open(counts, encoding="utf-8") as text:
        return next(int(line.split()[1]) for line in text if line.startswith("summary:"))


def no_valgrind(name: str, as_json: bool) -> bool:
    """True (after saying so) when valgrind is not installed: the bench measures nothing."""
    if shutil.which("valgrind") is not None:
        return False
    why = "valgrind is not installed (apt-get install valgrind): nothing measured"
    print(json.dumps({"note": why}) if as_json else f"{name}: {why}")
    return True


def instructions(way: str, steps: int, tmp: str) -> int:
    """Instructions one rank of `way` ran for `steps` steps, start and exit included."""
    script = os.path.join(tmp, f"{way}-{steps}.py")
    with open(script, "w", encoding="utf-8") as out:
        out.write(HEADS[way] + f"for i in range({steps + 1}):\n    x = i\n")
    counts = os.path.join(tmp, f"{way}-{steps}.out")
    valgrind = cachegrind(counts)
    env = bench_env({"PYTHONHASHSEED": "0"})
    prompt, sink = STOCK_PROMPT, ""
    argv = [*valgrind, sys.executable, script]
    if way == "ddptui":
        sink = os.path.join(tmp, f"sink-{steps}.sock")
        env |= {SOCKET_ENV: sink, TOKEN_ENV: "0" * 32, STATE_DIR_ENV: tmp, RANK_ENV: "0", "RANK": "0"}
        env[PLAIN_INPUT_ENV] = PLAIN_UNTIL_EDITED
        prompt, argv = b"(Pdb r0) ", [*valgrind, sys.executable, "-m", "ddptui.rank", script]
    ranks = PtyRanks(argv, [env], [prompt], sink)
    try:
        ranks.wait_prompts()
        for _ in range(steps):
            ranks.step()
        os.write(ranks.procs[0].fd, b"c\r")  # the loop ends: the rank exits and valgrind writes its counts
        ranks.procs[0].wait()
    finally:
        ranks.close()
    return counted(counts)


def main(argv: list[str] | None = None) -> int:
    """Count every way's instructions a step and print them, with ratios over stock pdb."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500, help="S2 - S1, the steps counted (500)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    if no_valgrind("rank_cost", args.json):
        return 0
    lockstep.STEP_TIMEOUT = 300.0  # a step under valgrind is some 50 times slower
    figures: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="ddptui-rank-cost-") as tmp:
        for way in HEADS:
            short, long = instructions(way, 100, tmp), instructions(way, 100 + args.steps, tmp)
            figures[way] = (long - short) / args.steps
    report = sys.stderr if args.json else sys.stdout
    print(f"{'way':<36}{'instructions a step':>20}{'x stock':>9}", file=report)
    for way, title in TITLES.items():
        print(f"{title:<36}{figures[way]:>20,.0f}{figures[way] / figures['stock']:>9.2f}", file=report)
    if args.json:
        print(json.dumps({"instructions_per_step": figures, "steps": args.steps}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
