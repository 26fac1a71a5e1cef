"""The app with many paused ranks: start-up, one lockstep step, and idle CPU, against 8 ranks.

Each side runs the real app headless (`DdptuiApp(...).run_test`, a real Session, real ptys) on
plain-Python ranks (`tests/scripts/plain_barrier.py`, no torch) and measures:

* **start**: from the app's start until every rank is at its prompt;
* **step**: one broadcast `n` (F10) until every rank is back at its prompt, as the app sees it;
* **idle CPU**: the ddptui process (`getrusage(RUSAGE_SELF)`: app, core, their threads) while
  every rank sits at its prompt and nothing is typed, as a share of one core.

The baseline is 8 ranks (a pane each, no state grid); the other side N ranks (default 256: a
state grid, panes for 8 of them). Headless Textual computes every frame but does not encode it
for a terminal, so the idle figure leaves that out on both sides. The ranks' own CPU is not
counted (they block in pdb's read). Other load on the machine moves the figures. `--json`
prints the figures as JSON on standard output (the table goes to standard error).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import sys
import time
from pathlib import Path

from ddptui.core.model.state import Phase
from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.ui.app import DdptuiApp

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "scripts" / "plain_barrier.py"


ROWS = (
    ("start", "start", 1.0, "s"),
    ("step", "step n", 1000.0, "ms"),
    ("idle", "idle CPU", 100.0, "%"),
)
"""(key, label, scale, unit) of each printed figure."""


def cpu_seconds() -> float:
    """User + system CPU of this process so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def all_paused(app: DdptuiApp, count: int) -> bool:
    """Every rank at its prompt, with its prompt printed."""
    ranks = app.session.ranks
    return len(ranks) == count and all(r.state.phase is Phase.PAUSED and r.prompt_shown() for r in ranks)


async def measure(count: int, window: float) -> dict[str, float]:
    """Start, step and idle CPU figures for `count` ranks."""
    app = DdptuiApp(Session(LaunchSpec(target=str(SCRIPT), nproc=count, stall_timeout=10)))
    figures: dict[str, float] = {}
    async with app.run_test(size=(200, 50)) as pilot:
        start = time.monotonic()
        while not all_paused(app, count):
            await pilot.pause(0.05)
        figures["start"] = time.monotonic() - start
        await pilot.pause(2.0)  # panes emulate their backlog, the grid draws
        before = cpu_seconds()
        await pilot.pause(window)
        figures["idle"] = (cpu_seconds() - before) / window
        start = time.monotonic()
        await pilot.press("f10")
        while app.session.lockstep.command or not all_paused(app, count):
            await pilot.pause(0.01)
        figures["step"] = time.monotonic() - start
        await app.session.close()
    return figures


def main(argv: list[str] | None = None) -> None:
    """Run both sides and print the figures and their ratios (the table, or JSON with --json)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=256, help="ranks on the measured side")
    parser.add_argument("--baseline", type=int, default=8, help="ranks on the baseline side")
    parser.add_argument("--window", type=float, default=10.0, help="seconds of idle measured")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    args = parser.parse_args(argv)
    report = sys.stderr if args.json else sys.stdout
    load_before = os.getloadavg()[0]
    sides = {n: asyncio.run(measure(n, args.window)) for n in (args.baseline, args.ranks)}
    base, other = sides[args.baseline], sides[args.ranks]
    print(f"{'':12}{args.baseline:>10} ranks{args.ranks:>10} ranks{'ratio':>10}", file=report)
    for key, label, scale, unit in ROWS:
        ratio = other[key] / base[key] if base[key] else float("inf")
        base_figure, other_figure = (
            f"{base[key] * scale:>11.1f}{unit:<5}",
            f"{other[key] * scale:>10.1f}{unit:<5}",
        )
        print(f"{label:12}{base_figure}{other_figure}{ratio:>9.1f}x", file=report)
    if args.json:
        figures = {
            str(n): {
                "start_s": round(side["start"], 3),
                "step_ms": round(side["step"] * 1000, 2),
                "idle_cpu_pct": round(side["idle"] * 100, 2),
            }
            for n, side in sides.items()
        }
        about = {"window_s": args.window, "load_before": round(load_before, 2)}
        about["load_after"] = round(os.getloadavg()[0], 2)
        print(
            json.dumps({"ranks": args.ranks, "baseline": args.baseline, "sides": figures, **about}, indent=2)
        )


if __name__ == "__main__":
    main()
