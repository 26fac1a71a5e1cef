"""Every benchmark of the speed issue in one run: one table of figures, baselines, ratios and goals.

Runs each bench script as a subprocess with `--json`, one after another (never side by side: the
machine has few cores; lockstep last, as stepping 256 ranks leaves the load average high for a
minute), and collects their figures:

1. lockstep step at 4 / 16 / 64 / 256 plain ranks (`bench/lockstep.py`): the ddptui core
   (`Session.broadcast`) and `ddptui --batch` end to end, against stock-pdb ranks stepped by a
   bare pty loop and against tmux with `synchronize-panes` (median steps). Goal: <= 1.5x the
   stock-pdb loop and below tmux at every size.
2. drain time of 1 and of 8 ranks flooding 8 MiB each of coloured log lines and `\\r` bars,
   under the app against under tmux (`bench/ui_flood.py`). Goal: <= tmux.
3. key -> screen latency p50 / p99 during the 8-rank flood (the same `bench/ui_flood.py` run), and
   the p99 of the keys typed while the ranks wrote (the catch-up after it left out). Goal: p99 <=
   50 ms, both.
4. memory of the app with 64 ranks x 10,000 lines against the tmux server's for the same
   (`bench/memory.py`). Goal: <= tmux.
5. idle CPU of the app with 256 paused ranks (`bench/idle.py`). Goal: under 2 % of a core.
6. `n` over a line that makes 20,000 Python calls (`bench/step_over.py`), with no breakpoint set
   and with one: a ddptui rank stepped by the core against a stock-pdb rank, each call being an
   event pdb's trace function sees; and in process, without a terminal (`bench/trace_overhead.py`),
   `r` out of a 20,000-iteration loop and `n` over 20,000 calls under RankPdb against pdb.Pdb.
   No goal in the issue; ddptui should not be the slower.
7. a rank's instructions per lockstep step, counted under valgrind (`bench/rank_cost.py`): a
   ddptui rank as the core runs it against a stock-pdb rank (and stock pdb on plain lines). No
   goal in the issue; the figure that does not move from run to run. Needs valgrind.
8. the core's instructions per lockstep step at 1 and 4 ranks, counted under valgrind
   (`bench/core_cost.py`): `Session.broadcast` against a bare asyncio loop over stock-pdb ranks.
   No goal in the issue: what the core's own work a step is, where timings move too much to say.
9. what `ddptui join` costs (`bench/join.py`): key -> screen latency at rest and during the 8-rank
   flood of item 3, and the ranks' drain time, for the app seen through `ddptui join` (a
   `--detach` session relayed over its socket) against the same app in its own terminal, both in
   a real tmux terminal, in the same run. No goal in the issue: the relay's price.

The scripts' own progress goes to standard error as they run; the table (with the machine: cores,
CPU model, load average, date, Python) follows. `--json` prints everything (the table's rows and
each script's own JSON) on standard output and the table on standard error. `--only 1,5` picks items,
`--sizes` the lockstep sizes, `--quick` smaller sizes everywhere (a smoke run, not figures to
quote). A script that fails, or has no `--json`, gives a note in the table instead of figures.
`--replay FILE` prints the table of a saved `--json` output again without running anything.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
TIMEOUT = 3600.0
"""Seconds one bench script may run."""
ITEMS = {
    1: "lockstep",
    2: "drain",
    3: "keys",
    4: "memory",
    5: "idle",
    6: "step over calls",
    7: "rank instructions",
    8: "core instructions",
    9: "join",
}
FLOOD_GOAL_MS = 50.0
IDLE_GOAL_PCT = 2.0
NO_FLOOD_JSON = "bench/ui_flood.py has no --json yet: not run (run it by hand for its own table)"


@dataclass
class Line:
    """One row of the table."""

    item: str
    ddptui: str
    baseline: str
    ratio: str
    goal: str
    met: str
    note: str = ""
    load: str = ""
    """The 1-minute load average when the item's script (or job size) started."""


# -- running the scripts ------------------------------------------------------------------------
def run_json(script: str, args: list[str]) -> tuple[Any, str]:
    """Run `bench/<script> <args> --json`; (its JSON, "") or (None, why there is none)."""
    argv = [sys.executable, str(BENCH / script), *args, "--json"]
    print(f"\n== {' '.join(argv[1:])}", file=sys.stderr, flush=True)
    began = time.monotonic()
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, timeout=TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return None, f"{script} timed out after {TIMEOUT:.0f} s"
    print(f"== {script}: {time.monotonic() - began:.0f} s, exit status {done.returncode}", file=sys.stderr)
    text = done.stdout.strip()
    start = text.find("{")
    try:
        return json.loads(
            text[start:]
        ) if start >= 0 else None, "" if start >= 0 else f"{script} printed no JSON"
    except ValueError:
        return None, f"{script} printed no valid JSON (exit status {done.returncode})"


def has_json_flag(script: str) -> bool:
    """Whether a bench script takes `--json` (it says so in its --help)."""
    argv = [sys.executable, str(BENCH / script), "--help"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return "--json" in done.stdout


# -- formatting --------------------------------------------------------------------------------
def num(value: float | None, unit: str, digits: int = 2) -> str:
    """A figure with its unit; `-` when missing."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    return f"{value:.{digits}f} {unit}".strip()


def times(value: float | None) -> str:
    """A ratio for the table; three decimals when two would show 1.00 for a ratio just over or under 1."""
    if value is None:
        return "-"
    return f"{value:.3f} x" if value != 1 and f"{value:.2f}" == "1.00" else f"{value:.2f} x"


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, None when either is missing or b is 0."""
    if a is None or b is None or not b or math.isnan(a) or math.isnan(b):
        return None
    return a / b


def load_of(value: Any) -> str:
    """A load average for the table; empty when unknown."""
    return f"{value:.1f}" if isinstance(value, (int, float)) else ""


def verdict(ok: bool | None) -> str:
    """yes / NO / - (not judged)."""
    return "-" if ok is None else "yes" if ok else "NO"


# -- item 1: lockstep -----------------------------------------------------------------------------
def lockstep_lines(data: Any, note: str) -> list[Line]:
    """Core and batch per size, each against stock pdb (<= 1.5x) and tmux (below it)."""
    if data is None:
        return [Line("1 lockstep", "-", "-", "-", "<= 1.5x stock, < tmux", "-", note)]
    lines = []
    for size in data["sizes"]:
        ways, notes = size["ways"], size.get("notes", {})
        for way, title in (("core", "core"), ("batch", "--batch")):
            if way not in ways:
                continue
            stock, tmux = (ways.get(base, {}).get("median_ms") for base in ("stock", "tmux"))
            ours, why = ways[way]["median_ms"], notes.get(way, "")
            for base_name, base, goal, limit in (
                ("stock", stock, "<= 1.5x", 1.5),
                ("tmux", tmux, "< 1x", 1.0),
            ):
                over = ratio(ours, base)
                met = None if over is None else over <= limit if base_name == "stock" else over < limit
                first = base_name == "stock"
                lines.append(
                    Line(
                        f"1 lockstep N={size['nproc']} {title}" if first else "",
                        num(ours, "ms") if first else "",
                        f"{base_name} {num(base, 'ms')}",
                        times(over),
                        goal,
                        verdict(met),
                        why if first else notes.get("tmux", "") if tmux is None else "",
                        load_of(size.get("load_average")) if first else "",
                    )
                )
    return lines


# -- items 2 and 3: ui_flood ----------------------------------------------------------------------
def walk(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    """Every (key path, value) in a JSON document."""
    found = [(path, node)]
    if isinstance(node, dict):
        for key, value in node.items():
            found += walk(value, (*path, str(key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            name = value.get("name") if isinstance(value, dict) else None
            found += walk(value, (*path, str(name or index)))
    return found


def nearest_rank(values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile (ui_flood.py's definition)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


SAMPLES = {"drain": {"drains", "drain_s"}, "screen": {"screen_ms"}, "writing": {"writing_ms"}}
"""Where a ui_flood.py JSON may keep the samples of each kind of figure."""


def flood_figure(data: Any, side: str, what: str) -> float | None:
    """A figure of one side of a ui_flood.py JSON, found by name wherever the JSON keeps it.

    `what`: drain_median / drain_max (s), screen_p50 / screen_p99 (ms), writing_p99 (ms: the keys
    typed while ranks wrote). Takes a summary figure whose key names it (`drain` + `median`/`max`,
    `screen` + `p50`/`p99`, `writing` + `p99`) under the side's key, else computes it from the
    side's samples (`drains`, `screen_ms`, `writing_ms`).
    """
    kind, stat = what.split("_")
    summaries, samples = [], []
    for path, value in walk(data):
        lowered = [part.lower() for part in path]
        if side not in lowered or "idle" in "".join(lowered) or "rest" in "".join(lowered):
            continue
        leaf = lowered[-1] if lowered else ""
        words = re.split(r"[^a-z0-9]+", leaf)
        if kind != "writing" and "writing" in leaf:
            continue
        if isinstance(value, (int, float)) and kind in leaf and (stat in words or leaf.endswith(stat)):
            summaries.append(float(value))
        if isinstance(value, list) and leaf in SAMPLES[kind]:
            samples = [float(v) for v in value if isinstance(v, (int, float))]
    if summaries:
        return summaries[0]
    if samples:
        if stat == "max":
            return max(samples)
        return statistics.median(samples) if stat in ("median", "p50") else nearest_rank(samples, 99)
    return None


def flood_lines(runs: dict[int, tuple[Any, str]], items: set[int]) -> list[Line]:
    """Drain time (1 and 8 ranks) and key latency (8 ranks) rows."""
    lines = []
    for ranks, (data, note) in runs.items():
        if 2 in items:
            stats = ("median", "max") if ranks > 1 else ("max",)
            for stat in stats:
                ours = flood_figure(data, "ddptui", f"drain_{stat}")
                theirs = flood_figure(data, "tmux", f"drain_{stat}")
                over = ratio(ours, theirs)
                title = f"2 drain {ranks} rank{'s' * (ranks > 1)}" + (f" ({stat})" if ranks > 1 else "")
                why = note or ("" if ours is not None else "drain times not found in ui_flood.py's JSON")
                met = verdict(None if over is None else over <= 1)
                cells = (num(ours, "s"), f"tmux {num(theirs, 's')}", times(over), "<= 1x", met, why)
                load = load_of(data and data.get("load_before")) if stat == stats[0] else ""
                lines.append(Line(title, *cells, load))
        if 3 in items and ranks == max(runs):
            for stat in ("screen_p50", "screen_p99", "writing_p99"):
                ours = flood_figure(data, "ddptui", stat)
                theirs = flood_figure(data, "tmux", stat)
                p99 = stat.endswith("p99")
                goal = f"<= {FLOOD_GOAL_MS:.0f} ms" if p99 else ""
                ok = None if ours is None or not p99 else ours <= FLOOD_GOAL_MS
                why = note or ("" if ours is not None else "key latencies not found in ui_flood.py's JSON")
                lost = data.get("ddptui", {}).get("keys_lost") if isinstance(data, dict) else None
                if p99 and lost:
                    why, ok = f"{lost} typed keys never showed (counted as {2000} ms)", False
                lines.append(
                    Line(
                        f"3 key->screen {stat.split('_')[1]}, {ranks} flooding"
                        + (", while writing" if stat.startswith("writing") else ""),
                        num(ours, "ms", 1),
                        f"tmux {num(theirs, 'ms', 1)}",
                        times(ratio(ours, theirs)),
                        goal,
                        verdict(ok),
                        why,
                        "",
                    )
                )
    return lines


# -- item 4: memory -------------------------------------------------------------------------------
def memory_lines(data: Any, note: str) -> list[Line]:
    """RSS growth of each ddptui run against the tmux server's."""
    if data is None:
        return [Line("4 memory", "-", "-", "-", "<= 1x tmux", "-", note)]
    base = data["tmux"].get("rss_growth")
    size = f"{data['ranks']}x{data['lines']}"
    lines: list[Line] = []
    for run in data["ddptui"]:
        key = "traced_growth" if run["traced"] else "rss_growth"
        value = run.get(key)
        over = ratio(value, base)
        what = "Python heap (tracemalloc)" if run["traced"] else "RSS"
        why = run.get("note") or data["tmux"].get("note") or held(run.get("holds") or {})
        lines.append(
            Line(
                f"4 memory {size} {run['mode']} {what}",
                num(value / 2**20 if value is not None else None, "MiB", 1),
                f"tmux {num(base / 2**20 if base is not None else None, 'MiB', 1)}",
                times(over),
                "<= 1x" if not run["traced"] else "",
                verdict(None if over is None or run["traced"] else over <= 1),
                why,
                load_of(data.get("load_before")) if not lines else "",
            )
        )
    return lines


def held(holds: dict[str, Any]) -> str:
    """What a ddptui memory run held, in words."""
    if not holds:
        return ""
    core = (
        "the core keeps every line"
        if holds["core_full"]
        else f"the core keeps >= {holds['core_lines_min']} lines a rank"
    )
    if holds["every_pane_full"]:
        return f"{core}; every pane emulated all of them (bench-forced scrollback)"
    panes = f"{holds['shown_panes']} panes on screen emulated >= {holds['shown_pane_lines_min']} lines"
    if holds.get("shown_skipped_bytes"):
        panes += (
            f" (they skipped {holds['shown_skipped_bytes'] / 2**20:.1f} MiB of the flood unemulated: "
            "a marker line in their scrollback)"
        )
    if holds["other_panes"]:
        panes += (
            f", the {holds['other_panes']} others hold <= {holds['other_pane_pending_max'] / 1024:.0f} KiB "
            "unemulated (emulated once shown)"
        )
    return f"{core}; {panes}"


# -- item 5: idle -----------------------------------------------------------------------------------
def idle_lines(data: Any, note: str) -> list[Line]:
    """Idle CPU of the app at N paused ranks, against the same app at 8."""
    if data is None:
        return [Line("5 idle CPU", "-", "-", "-", f"< {IDLE_GOAL_PCT:g} %", "-", note)]
    ours = data["sides"][str(data["ranks"])]["idle_cpu_pct"]
    base = data["sides"][str(data["baseline"])]["idle_cpu_pct"]
    return [
        Line(
            f"5 idle CPU, {data['ranks']} paused ranks",
            num(ours, "%"),
            f"{data['baseline']} ranks {num(base, '%')}",
            times(ratio(ours, base)),
            f"< {IDLE_GOAL_PCT:g} % of a core",
            verdict(ours < IDLE_GOAL_PCT),
            load=load_of(data.get("load_before")),
        )
    ]


# -- item 6: stepping over calls --------------------------------------------------------------------
def step_over_lines(data: Any, note: str) -> list[Line]:
    """`n` over a line of many Python calls: the core's ranks against stock pdb's."""
    if data is None:
        return [Line("6 n over calls", "-", "-", "-", "<= 1x stock", "-", note)]
    ours, base = data["ways"]["core"]["median_ms"], data["ways"]["stock"]["median_ms"]
    return [
        Line(
            f"6 n over {data['calls']} calls, {'a' if data['breakpoint'] else 'no'} breakpoint set",
            num(ours, "ms"),
            f"stock pdb {num(base, 'ms')}",
            times(ratio(ours, base)),
            "<= 1x stock",
            verdict(ours <= base),
            load=load_of(data.get("load_before")),
        )
    ]


def trace_lines(data: Any, note: str) -> list[Line]:
    """The trace function in process: RankPdb against pdb.Pdb, case by case."""
    if data is None:
        return [Line("6 trace function, in process", "-", "-", "-", "<= 1x stock", "-", note)]
    return [
        Line(
            f"6 {case} ({data['loop']}), in process",
            num(figures["rankpdb_ms"], "ms"),
            f"pdb.Pdb {num(figures['stock_ms'], 'ms')}",
            times(ratio(figures["rankpdb_ms"], figures["stock_ms"])),
            "<= 1x stock",
            verdict(figures["rankpdb_ms"] <= figures["stock_ms"]),
        )
        for case, figures in data["cases"].items()
    ]


def rank_cost_lines(data: Any, note: str) -> list[Line]:
    """A rank's instructions a lockstep step: ddptui's against stock pdb's (and on plain lines)."""
    if data is None:
        return [Line("7 rank instructions a step", "-", "-", "-", "(none)", "-", note)]
    counts = data["instructions_per_step"]
    return [
        Line(
            "7 rank instructions a step" if first else "",
            f"{counts['ddptui']:,.0f}" if first else "",
            f"{title} {counts[way]:,.0f}",
            times(ratio(counts["ddptui"], counts[way])),
            "(none)" if first else "",
            "-" if first else "",
        )
        for first, (way, title) in zip(
            (True, False), (("stock", "stock pdb"), ("stock-plain", "pdb, plain")), strict=True
        )
    ]


def core_cost_lines(data: Any, note: str) -> list[Line]:
    """The core's instructions a lockstep step at each size, against a bare asyncio loop's."""
    if data is None:
        return [Line("8 core instructions a step", "-", "-", "-", "(none)", "-", note)]
    return [
        Line(
            f"8 core instructions a step, N={nproc}",
            f"{ways['core']:,.0f}",
            f"asyncio loop {ways['floor']:,.0f}",
            times(ratio(ways["core"], ways["floor"])),
            "(none)",
            "-",
        )
        for nproc, ways in data["instructions_per_step"].items()
    ]


# -- item 9: ddptui join ----------------------------------------------------------------------------
JOIN_ROWS = (
    ("key->screen p50 at rest", "key_screen_idle_p50_ms", "ms", 1),
    ("key->screen p50, {ranks} flooding", "key_screen_p50_ms", "ms", 1),
    ("key->screen p99, {ranks} flooding", "key_screen_p99_ms", "ms", 1),
    ("drain {ranks} ranks (max)", "drain_max_s", "s", 2),
)
"""Item 9's rows: title, the figure's key in each side of bench/join.py's JSON, unit, digits."""


def join_lines(data: Any, note: str) -> list[Line]:
    """The app through `ddptui join` against the app in its own terminal, both in tmux."""
    if data is None:
        return [Line("9 join", "-", "-", "-", "(none)", "-", note)]
    lines = []
    for title, key, unit, digits in JOIN_ROWS:
        ours, theirs = data["join"].get(key), data["direct"].get(key)
        first = not lines
        lines.append(
            Line(
                f"9 join {title.format(ranks=data['ranks'])}",
                num(ours, unit, digits),
                f"direct {num(theirs, unit, digits)}",
                times(ratio(ours, theirs)),
                "(none)" if first else "",
                "-" if first else "",
                load=load_of(data.get("load_before")) if first else "",
            )
        )
    return lines


# -- machine and table -----------------------------------------------------------------------------
def machine() -> dict[str, Any]:
    """Where and when the run happened."""
    model = ""
    try:
        for row in Path("/proc/cpuinfo").read_text().splitlines():
            if row.startswith("model name"):
                model = row.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    tmux = shutil.which("tmux")
    version = (
        subprocess.run([tmux, "-V"], capture_output=True, text=True, check=False).stdout.strip()
        if tmux
        else ""
    )
    try:
        import psutil

        memory = f"{psutil.virtual_memory().total / 2**30:.0f} GiB"
    except ImportError:
        memory = ""
    return {
        "date": datetime.datetime.now().isoformat(timespec="minutes"),
        "usable_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "online_cores": os.cpu_count(),
        "cpu_model": model,
        "memory": memory,
        "platform": f"{platform.machine()}, {platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "tmux": version,
        "load_average_start": [round(x, 2) for x in os.getloadavg()],
        "unbuffered": bool(os.environ.get("PYTHONUNBUFFERED")),  # the ranks inherit it: a write a print
    }


def render(lines: list[Line], about: dict[str, Any]) -> str:
    """The table, the machine under it, notes as footnotes."""
    head = Line("item", "ddptui", "baseline", "ratio", "goal", "met", load="load")
    rows = [head, *lines]
    widths = [
        max(len(getattr(row, name)) for row in rows)
        for name in ("item", "ddptui", "baseline", "ratio", "goal")
    ]
    out, notes = [], []
    for row in rows:
        cells = [row.item, row.ddptui, row.baseline, row.ratio, row.goal]
        text = "  ".join(
            cell.ljust(width) if i in (0, 2, 4) else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )
        text += f"  {row.met:<3}  {row.load:>4}"
        if row.note:
            if row.note not in notes:
                notes.append(row.note)
            text += f"  [{notes.index(row.note) + 1}]"
        out.append(text.rstrip())
        if row is head:
            out.append("-" * len(out[0]))
    out += [f"[{n}] {note}" for n, note in enumerate(notes, 1)]
    out.append("load: the 1-minute load average as the item (or lockstep job size) started")
    load = " -> ".join(
        "/".join(f"{x:.2f}" for x in about[k]) for k in ("load_average_start", "load_average_end")
    )
    out.append(
        f"\n{about['date']}; {about['usable_cores']} usable cores ({about['online_cores']} online), "
        f"{about['cpu_model']}, {about['memory']} RAM; {about['platform']}; Python {about['python']}; "
        f"{about['tmux']}; load average (1/5/15 min) {load}; {about['wall_s']:.0f} s"
        + ("; PYTHONUNBUFFERED=1" if about.get("unbuffered") else "")
    )
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="1,2,3,4,5,6,7,8,9", help="items to run, e.g. 1,5 (all)")
    parser.add_argument("--sizes", help="lockstep rank counts (4,16,64,256; --quick: 4,16)")
    parser.add_argument("--quick", action="store_true", help="smaller sizes everywhere: a smoke run")
    parser.add_argument("--json", action="store_true", help="print everything as JSON (the table to stderr)")
    parser.add_argument("--flood-rounds", type=int, help="ui_flood.py --rounds (2; --quick: 1)")
    parser.add_argument("--replay", metavar="FILE", help="print the table of a saved --json run; run nothing")
    args = parser.parse_args(argv)
    try:
        args.only = {int(item) for item in args.only.split(",") if item.strip()}
    except ValueError:
        parser.error("--only takes item numbers 1-9, e.g. 1,5")
    if not args.only or not args.only <= set(ITEMS):
        parser.error("--only takes item numbers 1-9, e.g. 1,5")
    args.sizes = args.sizes or ("4,16" if args.quick else "4,16,64,256")
    args.flood_rounds = args.flood_rounds or (1 if args.quick else 2)
    return args


def run_items(args: argparse.Namespace) -> dict[str, Any]:
    """Run the chosen items' scripts; each script's JSON (or a note) by name."""
    raw: dict[str, Any] = {}
    if args.only & {2, 3}:
        json_flag = has_json_flag("ui_flood.py")
        for ranks in ([1] if 2 in args.only else []) + [8]:
            if not json_flag:
                raw[f"ui_flood_{ranks}"] = {"note": NO_FLOOD_JSON}
                continue
            size = [
                "--ranks",
                str(ranks),
                "--mib",
                "2" if args.quick else "8",
                "--rounds",
                str(args.flood_rounds),
            ]
            data, note = run_json("ui_flood.py", size)
            raw[f"ui_flood_{ranks}"] = data or {"note": note}
    if 4 in args.only:
        size = ["--ranks", "16", "--lines", "2000", "--no-tracemalloc"] if args.quick else []
        data, note = run_json("memory.py", size)
        raw["memory"] = data or {"note": note}
    if 5 in args.only:
        size = ["--ranks", "64", "--window", "3"] if args.quick else []
        data, note = run_json("idle.py", size)
        raw["idle"] = data or {"note": note}
    if 6 in args.only:
        for name, mode in (("step_over", []), ("step_over_breakpoint", ["--breakpoint"])):
            data, note = run_json("step_over.py", [*mode, *(["--steps", "10"] if args.quick else [])])
            raw[name] = data or {"note": note}
        data, note = run_json("trace_overhead.py", ["--rounds", "1"] if args.quick else [])
        raw["trace_overhead"] = data or {"note": note}
    if 7 in args.only:
        data, note = run_json("rank_cost.py", ["--steps", "100"] if args.quick else [])
        raw["rank_cost"] = data or {"note": note}
    if 8 in args.only:
        data, note = run_json("core_cost.py", ["--steps", "50"] if args.quick else [])
        raw["core_cost"] = data or {"note": note}
    if 9 in args.only:
        data, note = run_json("join.py", ["--quick"] if args.quick else [])
        raw["join"] = data or {"note": note}
    if 1 in args.only:  # last: stepping 256 ranks leaves the load average high for a minute
        steps = ["--steps", "10", "--batch-runs", "1", "--batch-steps", "50"] if args.quick else []
        data, note = run_json("lockstep.py", ["--sizes", args.sizes, *steps])
        raw["lockstep"] = data or {"note": note}
    return raw


def table_lines(raw: dict[str, Any], only: set[int]) -> list[Line]:
    """The table's rows from the scripts' JSON."""

    def split(name: str) -> tuple[Any, str]:
        data = raw[name]
        return (None, data["note"]) if set(data) == {"note"} else (data, "")

    lines: list[Line] = []
    if "lockstep" in raw:
        lines += lockstep_lines(*split("lockstep"))
    flood = {int(name.rsplit("_", 1)[1]): split(name) for name in raw if name.startswith("ui_flood_")}
    if flood:
        lines += flood_lines(dict(sorted(flood.items())), only)
    if "memory" in raw:
        lines += memory_lines(*split("memory"))
    if "idle" in raw:
        lines += idle_lines(*split("idle"))
    for name in ("step_over", "step_over_breakpoint"):
        if name in raw:
            lines += step_over_lines(*split(name))
    if "trace_overhead" in raw:
        lines += trace_lines(*split("trace_overhead"))
    if "rank_cost" in raw:
        lines += rank_cost_lines(*split("rank_cost"))
    if "core_cost" in raw:
        lines += core_cost_lines(*split("core_cost"))
    if "join" in raw:
        lines += join_lines(*split("join"))
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the chosen items (or reread a --json file), print the table (and the JSON)."""
    args = parse_args(argv)
    if args.replay:
        saved = json.loads(Path(args.replay).read_text())
        about, raw = saved["machine"], saved["raw"]
    else:
        about = machine()
        began = time.monotonic()
        raw = run_items(args)
        about["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
        about["wall_s"] = time.monotonic() - began
    lines = table_lines(raw, args.only)
    print("\n" + render(lines, about), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"machine": about, "rows": [asdict(line) for line in lines], "raw": raw}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
