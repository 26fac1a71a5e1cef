"""Memory with a long scrollback: the ddptui app against a tmux server holding the same ranks.

N plain-Python ranks (default 64, no torch) each print L lines of log (default 10,000: short step
lines, every fourth one coloured, all narrower than a pane so none wraps) and then stop at
`breakpoint()`. Both sides run the same rank script, written to a temp dir.

ddptui side: the real app headless, `DdptuiApp(Session(LaunchSpec(...))).run_test()` at 200x50,
each run in a fresh child process of this script (so one run's freed memory does not hide the
next one's). The figure is the growth of that process's RSS (psutil; what a user's `top` shows)
from just before the app is built (everything imported) until every rank is at its prompt, every
shown pane has emulated its output and a `gc.collect()` ran. A second child does the same under
`tracemalloc` (Python heap only, no RSS: tracemalloc's own bookkeeping inflates it) and reports
the traced growth. Two ways of running the app:

* shipped: the app as it is. Every byte of every rank stays in the core (`Rank.output`, 8 MiB a
  rank); the panes on screen (8 of 64: a state grid shows the rest) emulate it into a scrollback
  of `TermScreen`'s default size, skipping what a flood scrolls past (a marker line instead); the
  other panes only buffer their latest output (capped) until they are shown. The figures say how
  many lines each pane's scrollback ended up with.
* full: what holding L lines of *emulated* scrollback in every pane costs: the bench gives every
  pane's `TermScreen` a history of L lines, no pending cap and no `skip_ahead`, and emulates all
  of them.

tmux side: a private server (`tmux -L <private> -f /dev/null`, `history-limit` L + 100), one
80x24 window per rank running the same command (stock pdb). The figure is the growth of the tmux
server's RSS (psutil) from the first window (a `sleep`) to every rank at its prompt.

Both sides are checked to hold the L lines: for ddptui, each rank's newline count in the core
and each pane's scrollback length (`TermScreen.total_lines`); for tmux, every pane's
`history_size` and `capture-pane -S -` of the first and last rank (their first and last log line
must be there). What each holds is printed with the figures. `--json` prints the figures as JSON
on standard output (the table goes to standard error). Ranks, apps and tmux servers end in
`finally` blocks.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import psutil

SIZE = (200, 50)
"""The app's terminal size (columns, lines)."""
TMUX_WINDOW = (80, 24)
"""Each tmux window's columns and lines (a pane per rank, like a terminal per rank)."""
READY_TIMEOUT = 300.0
"""Seconds for every rank to reach its prompt (and every shown pane to catch up)."""
RANK_SCRIPT = r'''
"""A rank for bench/memory.py: print MEMORY_LINES lines of log, then stop at breakpoint()."""
import os, sys

rank, lines = int(os.environ["RANK"]), int(os.environ["MEMORY_LINES"])
write = sys.stdout.write
for i in range(lines):
    if i % 4 == 3:
        write("\x1b[32mINFO\x1b[0m r%d step %d ok\n" % (rank, i))
    else:
        write("[r%d] step %d loss=%.4f\n" % (rank, i, 1 / (i + 1)))
sys.stdout.flush()
breakpoint()
'''


def rss() -> int:
    """This process's resident set size, bytes."""
    return int(psutil.Process().memory_info().rss)


def mib(value: float | None) -> str:
    """Bytes as MiB for the table, `-` for not measured."""
    return "-" if value is None else f"{value / 2**20:.1f}"


# -- ddptui side (a child process per run) ------------------------------------------------------
def full_scrollback(lines: int) -> None:
    """Give every pane the app builds a history of `lines` lines and no cap on pending bytes."""
    from ddptui.term.screen import TermScreen
    from ddptui.ui import rank_pane

    class FullScreen(TermScreen):  # type: ignore[misc,unused-ignore]
        def __init__(self, columns: int, lines_: int, history: int = 0, **_: object) -> None:
            super().__init__(columns, lines_, lines + 100, max_pending=1 << 40, keep=1 << 40)

        def skip_ahead(self, work: int = 0) -> int:
            return 0  # emulate every line, none skipped as unable to change the final screen

    rank_pane.TermScreen = FullScreen  # type: ignore[misc,unused-ignore]


async def app_run(script: Path, ranks: int, lines: int, mode: str, traced: bool) -> dict[str, Any]:
    """Run the app on the ranks until all are paused and emulated; the figures and what it holds."""
    from ddptui.core.model.state import Phase
    from ddptui.core.session.session import Session
    from ddptui.core.transport.launch import LaunchSpec
    from ddptui.ui.app import DdptuiApp

    if mode == "full":
        full_scrollback(lines)
    env = {"MEMORY_LINES": str(lines), "PYTHONUNBUFFERED": ""}
    gc.collect()
    before_rss = rss()
    if traced:
        tracemalloc.start()
    before_traced = tracemalloc.get_traced_memory()[0] if traced else 0
    app = DdptuiApp(Session(LaunchSpec(target=str(script), nproc=ranks, stall_timeout=60, env=env)))
    began = time.monotonic()
    figures: dict[str, Any] = {"mode": mode, "traced": traced}
    try:
        async with app.run_test(size=SIZE) as pilot:

            def paused() -> bool:
                every = app.session.ranks
                return len(every) == ranks and all(
                    r.state.phase is Phase.PAUSED and r.prompt_shown() for r in every
                )

            while not paused():
                if time.monotonic() - began > READY_TIMEOUT:
                    raise TimeoutError("ranks did not all reach their prompt")
                await pilot.pause(0.1)
            figures["ready_s"] = round(time.monotonic() - began, 2)
            if mode == "full":
                for pane in app.panes:
                    while pane.terminal.pending:
                        pane.terminal.process()
                        await asyncio.sleep(0)
            while any(pane.terminal.pending for pane in app.panes if pane.display and pane.is_mounted):
                await pilot.pause(0.1)
            await pilot.pause(1.0)  # the last frames, the state grid
            gc.collect()
            figures["rss_before"] = before_rss
            figures["rss_after"] = rss()
            figures["rss_growth"] = figures["rss_after"] - before_rss
            if traced:
                figures["traced_growth"] = tracemalloc.get_traced_memory()[0] - before_traced
                tracemalloc.stop()
            figures["holds"] = ddptui_holds(app, lines)
            figures["helper_rss"] = helper_rss()
            figures["emulated_s"] = round(time.monotonic() - began, 2)
            await app.session.close()
    finally:
        app.session.kill_now()
    return figures


def helper_rss() -> int:
    """RSS of the session's watchdog process (`ddptui.core.transport.reaper`), not counted in the growth."""
    total = 0
    for process in psutil.Process().children(recursive=True):
        try:
            if "ddptui.core.transport.reaper" in " ".join(process.cmdline()):
                total += int(process.memory_info().rss)
        except psutil.Error:
            continue
    return total


def ddptui_holds(app: Any, lines: int) -> dict[str, Any]:
    """What the app holds: log lines per rank in the core, scrollback lines per pane."""
    core = [rank.output.since(rank.output.start).count(b"\n") for rank in app.session.ranks]
    dropped = sum(rank.output.start for rank in app.session.ranks)
    shown = [p for p in app.panes if p.display and p.is_mounted]
    others = [p for p in app.panes if p not in shown]

    def scrollback(panes: list[Any]) -> list[int]:
        return [p.terminal.total_lines for p in panes]

    return {
        "core_lines_min": min(core),
        "core_bytes_dropped": dropped,
        "core_full": min(core) >= lines and not dropped,
        "shown_panes": len(shown),
        "shown_pane_lines_min": min(scrollback(shown), default=0),
        "shown_skipped_bytes": sum(p.terminal.skipped_bytes for p in shown),
        "other_panes": len(others),
        "other_pane_lines_min": min(scrollback(others), default=0),
        "other_pane_pending_max": max((p.terminal.pending for p in others), default=0),
        "skipped_bytes_total": sum(p.terminal.skipped_bytes for p in app.panes),
        "every_pane_full": all(n >= lines for n in scrollback(app.panes)),
    }


def child(args: argparse.Namespace) -> None:
    """One app run (--child MODE[,traced]): its figures as JSON on stdout."""
    mode, _, traced = args.child.partition(",")
    figures = asyncio.run(app_run(Path(args.script), args.ranks, args.lines, mode, traced == "traced"))
    print(json.dumps(figures))


def run_child(script: Path, args: argparse.Namespace, mode: str, traced: bool) -> dict[str, Any]:
    """Run one app run in a fresh interpreter; its figures, or a note on why there are none."""
    what = f"{mode},traced" if traced else mode
    argv = [sys.executable, __file__, "--child", what, "--script", str(script)]
    argv += ["--ranks", str(args.ranks), "--lines", str(args.lines)]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=READY_TIMEOUT + 120, check=False)
    except subprocess.TimeoutExpired:
        return {"mode": mode, "traced": traced, "note": "the app run timed out"}
    try:
        return dict(json.loads(done.stdout.strip().splitlines()[-1]))
    except (IndexError, ValueError):
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {"mode": mode, "traced": traced, "note": f"the app run failed: {' | '.join(tail)}"}


# -- tmux side -----------------------------------------------------------------------------------
class TmuxServer:
    """A private tmux server with a window per rank."""

    def __init__(self, lines: int) -> None:
        self.name = f"ddptui-memory-{os.getpid()}"
        self.lines = lines
        self.pid = 0

    def run(self, *args: str) -> str:
        """One tmux command on the private server; its output."""
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "PYTHONBREAKPOINT")}
        argv = ["tmux", "-L", self.name, "-f", "/dev/null", *args]
        return subprocess.run(argv, capture_output=True, text=True, env=env, check=True).stdout

    def start(self) -> None:
        """The server, with a placeholder window and the history limit set before any rank pane."""
        columns, lines = TMUX_WINDOW
        self.run("new-session", "-d", "-s", "mem", "-x", str(columns), "-y", str(lines), "exec sleep 3600")
        self.pid = int(self.run("display-message", "-p", "#{pid}").strip())
        self.run("set-option", "-g", "history-limit", str(self.lines + 100))

    def close(self) -> None:
        """Kill the server (its panes get SIGHUP) and remove its socket."""
        subprocess.run(["tmux", "-L", self.name, "kill-server"], capture_output=True, check=False)
        if self.pid:
            deadline = time.monotonic() + 5
            while psutil.pid_exists(self.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
        socket_dir.joinpath(self.name).unlink(missing_ok=True)


def tmux_side(script: Path, args: argparse.Namespace) -> dict[str, Any]:
    """Run the ranks in tmux windows; the server's RSS growth and what its panes hold."""
    server = TmuxServer(args.lines)
    try:
        server.start()
        process = psutil.Process(server.pid)
        time.sleep(0.2)
        before = int(process.memory_info().rss)
        began = time.monotonic()
        for rank in range(args.ranks):
            env = (f"RANK={rank}", f"MEMORY_LINES={args.lines}", "TERM=xterm-256color")
            options = [x for e in env for x in ("-e", e)]
            server.run("new-window", "-d", "-t", "mem", *options, sys.executable, str(script))
        server.run("kill-window", "-t", "mem:0")
        wait_tmux_prompts(server, args.ranks, began)
        ready = round(time.monotonic() - began, 2)
        time.sleep(1.0)
        after = int(process.memory_info().rss)
        holds = tmux_holds(server, args.lines)
    finally:
        server.close()
    return {
        "rss_before": before,
        "rss_after": after,
        "rss_growth": after - before,
        "ready_s": ready,
        "holds": holds,
    }


def pane_rows(server: TmuxServer) -> dict[str, int]:
    """Every rank pane's id and history size."""
    rows = server.run("list-panes", "-s", "-t", "mem", "-F", "#{pane_id} #{history_size}").split("\n")
    return {pane: int(size) for pane, size in (row.split() for row in rows if row.strip())}


def wait_tmux_prompts(server: TmuxServer, ranks: int, began: float) -> None:
    """Wait until every pane printed all its lines and shows a `(Pdb)` prompt."""
    waiting: set[str] = set()
    while True:
        if time.monotonic() - began > READY_TIMEOUT:
            raise TimeoutError(f"tmux: {len(waiting) or ranks} panes never showed their prompt")
        panes = pane_rows(server)
        if len(panes) == ranks:
            waiting = {
                p for p in panes if server.run("capture-pane", "-p", "-t", p).rstrip().endswith("(Pdb)")
            }
            if len(waiting) == ranks:
                return
            waiting = set(panes) - waiting
        time.sleep(0.5)


def tmux_holds(server: TmuxServer, lines: int) -> dict[str, Any]:
    """What the tmux panes hold: history sizes, and the first and last rank's log complete."""
    panes = pane_rows(server)
    complete = []
    ids = list(panes)
    for pane in (ids[0], ids[-1]):
        text = server.run("capture-pane", "-p", "-S", "-", "-E", "-", "-t", pane)
        logged = [line for line in text.splitlines() if " step " in line]
        first, last = logged[:1], logged[-1:]
        complete.append(len(logged) == lines and " step 0 " in first[0] and f" step {lines - 1} " in last[0])
    sizes = list(panes.values())
    return {
        "panes": len(panes),
        "history_lines_min": min(sizes),
        "history_lines_max": max(sizes),
        "sampled_panes_complete": all(complete),
        "every_pane_full": min(sizes) + TMUX_WINDOW[1] >= lines and all(complete),
    }


# -- report --------------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=64, help="rank count (64)")
    parser.add_argument("--lines", type=int, default=10_000, help="log lines each rank prints (10000)")
    parser.add_argument("--modes", default="shipped,full", help="ddptui runs: shipped,full (both)")
    parser.add_argument("--no-tracemalloc", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--script", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.ranks < 1 or args.lines < 1 or not args.modes or not set(args.modes) <= {"shipped", "full"}:
        parser.error("need --ranks >= 1, --lines >= 1 and --modes from shipped,full")
    return args


def describe_ddptui(run: dict[str, Any]) -> str:
    """What one ddptui run held, in words."""
    holds = run.get("holds")
    if not holds:
        return str(run.get("note", "not measured"))
    core = (
        "every line in the core" if holds["core_full"] else f"core: >= {holds['core_lines_min']} lines a rank"
    )
    shown = f"{holds['shown_panes']} panes on screen >= {holds['shown_pane_lines_min']} lines"
    if holds.get("shown_skipped_bytes"):
        shown += f" ({holds['shown_skipped_bytes'] / 2**20:.1f} MiB skipped unemulated)"
    if holds["other_panes"]:
        others = f"{holds['other_panes']} others >= {holds['other_pane_lines_min']} lines"
        if holds["other_pane_pending_max"]:
            others += f" + <= {holds['other_pane_pending_max'] // 1024} KiB unemulated"
    else:
        others = ""
    return "; ".join(part for part in (core, shown, others) if part)


def main(argv: list[str] | None = None) -> None:
    """Run the tmux side and the ddptui runs; print the table (or JSON with --json)."""
    args = parse_args(argv)
    if args.child:
        child(args)
        return
    report = sys.stderr if args.json else sys.stdout
    load_before = os.getloadavg()[0]
    print(f"{args.ranks} ranks x {args.lines} lines, load average {load_before:.2f}", file=report, flush=True)
    result: dict[str, Any] = {"ranks": args.ranks, "lines": args.lines, "load_before": round(load_before, 2)}
    with tempfile.TemporaryDirectory(prefix="ddptui-memory-") as tmp:
        script = Path(tmp, "memory_rank.py")
        script.write_text(RANK_SCRIPT)
        if shutil.which("tmux") is None:
            result["tmux"] = {"note": "tmux is not installed"}
        else:
            try:
                result["tmux"] = tmux_side(script, args)
            except (subprocess.CalledProcessError, TimeoutError, OSError) as exc:
                result["tmux"] = {"note": f"tmux side failed: {str(exc).strip()[:200]}"}
        print(f"tmux: {mib(result['tmux'].get('rss_growth'))} MiB", file=report, flush=True)
        runs = []
        for mode in args.modes:
            for traced in (False,) if args.no_tracemalloc else (False, True):
                runs.append(run_child(script, args, mode, traced))
                grown = runs[-1].get("traced_growth" if traced else "rss_growth")
                print(
                    f"ddptui {mode}{' traced' if traced else ''}: {mib(grown)} MiB", file=report, flush=True
                )
    result["ddptui"] = runs
    result["load_after"] = round(os.getloadavg()[0], 2)
    print_table(result, report)
    if args.json:
        print(json.dumps(result, indent=2))


def print_table(result: dict[str, Any], report: Any) -> None:
    """The figures: growth in MiB, ratio over tmux, what each side held."""
    tmux = result["tmux"]
    base = tmux.get("rss_growth")
    print(f"\n{'':34}{'MiB':>9}{'x tmux':>8}  holds", file=report)
    if base is not None:
        holds = tmux["holds"]
        text = (
            f"{holds['panes']} panes, history {holds['history_lines_min']}-{holds['history_lines_max']} lines"
        )
        text += (
            ", sampled panes complete" if holds["sampled_panes_complete"] else ", SAMPLED PANES INCOMPLETE"
        )
        print(f"{'tmux server RSS growth':34}{mib(base):>9}{'1.00':>8}  {text}", file=report)
    else:
        print(f"{'tmux server RSS growth':34}{'-':>9}{'-':>8}  {tmux.get('note', '')}", file=report)
    for run in result["ddptui"]:
        key = "traced_growth" if run["traced"] else "rss_growth"
        label = f"ddptui {run['mode']}: {'tracemalloc' if run['traced'] else 'process RSS growth'}"
        value = run.get(key)
        ratio = f"{value / base:.2f}" if value is not None and base else "-"
        print(f"{label:34}{mib(value):>9}{ratio:>8}  {describe_ddptui(run)}", file=report)
    helpers = [run["helper_rss"] for run in result["ddptui"] if run.get("helper_rss")]
    if helpers:
        print(
            f"(not counted above: ddptui's watchdog process, RSS {mib(max(helpers))} MiB, any size)",
            file=report,
        )
    print(f"load average {result['load_before']} -> {result['load_after']}", file=report)


if __name__ == "__main__":
    main()
