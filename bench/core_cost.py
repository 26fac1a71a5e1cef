"""What one lockstep step costs the core, in machine instructions: `Session.broadcast` against a
bare asyncio loop over the same number of ranks.

A step's time on a small machine moves 10-30 % from run to run; its instruction count does not.
Each way runs its driver under valgrind (`--tool=cachegrind --cache-sim=no`; the ranks it starts
run natively, valgrind does not follow an exec), twice (S1 and S2 steps); the difference over
S2 - S1 is one step's instructions in the driver process, start-up and exit taken out. Ways, at
each job size N (1 and 4 by default):

* core: `await Session.broadcast("n")` over N `python -m ddptui.rank` ranks, as `bench/lockstep.py`
  times it (no pump, no front end): the rank's events, its states, the lockstep's bookkeeping.
* floor: a bare asyncio loop over N stock-pdb ranks on raw ptys: one reader a pty, `n` written to
  each, a future resolved once every pty's output ends with its prompt. What any asyncio driver
  pays (the loop's wake-ups, the reads and writes), none of ddptui's work.

Under valgrind a step lasts some 50 times longer, long enough for the core's stall watch to sample
the process table in a thread while ranks run (which it never does during a real sub-millisecond
step): the driver widens that window (`IDLE_WINDOW`) so the count is the step's own work.

Needs valgrind (`apt-get install valgrind`); without it, says so and exits 0. `--json` prints the
figures on standard output.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

import lockstep
from rank_cost import cachegrind, counted, no_valgrind

BENCH = os.path.dirname(os.path.abspath(__file__))
TIMEOUT = 900.0
"""Seconds one valgrind run may take."""
DRIVER = """\
import asyncio, os, sys
sys.path.insert(0, {bench!r})
import lockstep
from ddptui.core.session import stalls
from ddptui.core.session import watchdog

watchdog.IDLE_WINDOW = stalls.IDLE_WINDOW = 1e9  # see core_cost.py: no process-table scans
lockstep.STEP_TIMEOUT = 300.0
way, nproc, steps, script = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]


async def floor() -> None:
    ranks = lockstep.stock_ranks(nproc, script)
    try:
        ranks.wait_prompts()
        loop = asyncio.get_running_loop()
        fds = [proc.fd for proc in ranks.procs]
        for fd in fds:
            ranks.selector.unregister(fd)
        seen = [b""] * nproc
        out: set[int] = set()
        back: list[asyncio.Future[None]] = []

        def read(index: int) -> None:
            seen[index] += os.read(fds[index], 65536)
            if index in out and seen[index].endswith(lockstep.STOCK_PROMPT):
                out.discard(index)
                if not out:
                    back[0].set_result(None)

        for index, fd in enumerate(fds):
            loop.add_reader(fd, read, index)
        for _ in range(steps):
            back[:] = [loop.create_future()]
            out.update(range(nproc))
            for index, fd in enumerate(fds):
                seen[index] = b""
                os.write(fd, b"n\\r")
            await back[0]  # no timer a step: the run itself is bounded (TIMEOUT)
        for fd in fds:
            loop.remove_reader(fd)
            ranks.selector.register(fd, lockstep.selectors.EVENT_READ)
    finally:
        ranks.close()


async def core() -> None:
    way = await lockstep.core_way(nproc, script)
    try:
        for _ in range(steps):
            await way.step()
    finally:
        await way.close()


asyncio.run(floor() if way == "floor" else core())
"""
TITLES = {"core": 'core, Session.broadcast("n")', "floor": "bare asyncio loop, stock pdb"}


def instructions(way: str, nproc: int, steps: int, tmp: str) -> int:
    """Instructions the driver of `way` ran for `steps` steps of `nproc` ranks, start and exit included."""
    driver, script = os.path.join(tmp, "driver.py"), os.path.join(tmp, "rank.py")
    counts = os.path.join(tmp, f"{way}-{nproc}-{steps}.out")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"} | {"PYTHONHASHSEED": "0"}
    subprocess.run(
        [*cachegrind(counts), sys.executable, driver, way, str(nproc), str(steps), script],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=TIMEOUT,
    )
    return counted(counts)


def main(argv: list[str] | None = None) -> int:
    """Count each way's instructions a step at each size; print them, with the core over the floor."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,4", help="comma-separated rank counts (1,4)")
    parser.add_argument("--steps", type=int, default=200, help="S2 - S1, the steps counted (200)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    if not sizes or min(sizes) < 1 or args.steps < 1:
        parser.error("need rank counts >= 1 and --steps >= 1")
    if no_valgrind("core_cost", args.json):
        return 0

    figures: dict[int, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="ddptui-core-cost-") as tmp:
        with open(os.path.join(tmp, "driver.py"), "w", encoding="utf-8") as out:
            out.write(DRIVER.format(bench=BENCH))
        with open(os.path.join(tmp, "rank.py"), "w", encoding="utf-8") as out:
            out.write(lockstep.RANK_SCRIPT)
        for nproc in sizes:
            figures[nproc] = {}
            for way in TITLES:
                short = instructions(way, nproc, 20, tmp)
                long = instructions(way, nproc, 20 + args.steps, tmp)
                figures[nproc][way] = (long - short) / args.steps
    report = sys.stderr if args.json else sys.stdout
    print(f"{'N':>4}  {'way':<32}{'instructions a step':>20}{'x floor':>9}", file=report)
    for nproc, ways in figures.items():
        for way, title in TITLES.items():
            print(f"{nproc:>4}  {title:<32}{ways[way]:>20,.0f}{ways[way] / ways['floor']:>9.2f}", file=report)
    if args.json:
        print(json.dumps({"instructions_per_step": figures, "steps": args.steps}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
