"""What `ddptui join` costs: key → screen latency and drain time under a log flood, joined against direct.

The measurements of `bench/ui_flood.py` (its rank script, typist, probe and tmux client, imported
from it), made twice in the same run, each time with the real app in a real terminal, a private
tmux server's 200x50 window (status line off) with a tmux client attached in a pty the bench
drains:

* **direct**: the window runs `ddptui --no-session --nproc-per-node N SCRIPT`: the app in its own
  terminal, in the process the terminal started;
* **join**: `ddptui --detach --nproc-per-node N SCRIPT` starts a session (in a fresh
  `$XDG_RUNTIME_DIR`), and the window runs `ddptui join ID`: the same app, drawn on the session's
  pty and relayed to the joined terminal as `Screen` messages (JSON lines, base64 bytes), its
  keys sent back as `Keys`.

Once the app shows, F2 puts typing on the command line; keys are typed into the tmux client's
pty, and a key's latency is until the typed character shows up in the client's output (so both
sides include tmux's own time, and the join side the relay both ways). N ranks (8) each print M
MiB (8) of log as in ui_flood.py; the **drain time** is how long a rank took to get its bytes
out. The window (`go→idle`) ends when the screen shows every rank's pdb prompt, the last thing
the flood draws (the app shows 8 panes at most); `catch-up` is its part after the last write.

Below ui_flood's rows: the CPU of each part in the window (`app`: the app's process, or the
session's, with its pty pump; `join`: the join process; `tmux`: server and client), and what the
app drew: the bytes the app wrote to its terminal (direct) or the join process wrote to its own
(join: the relayed frames, one write a `Screen` message). `ratio` is join / direct. `--rounds N`
(2) alternates the sides and pools their samples; `--quick` is a smoke run (2 ranks x 1 MiB, one
round); `--json` prints the figures as one JSON object on stdout (the rest on stderr);
`--py-spy DIR` records the direct app, the session and the join process with py-spy in their
windows (it pauses them at each sample: for where time goes, not for figures) and prints their
busiest functions and files. Every session, tmux server and process the bench starts is ended
before it exits, on an error or Ctrl+C too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

import psutil
from detached import (
    SRC,
    caught_up,
    ddptui_argv,
    end_all,
    kill_session,
    open_window,
    pump_of,
    start_session,
    typing_on_command_line,
    unique,
)
from profile_stacks import PySpy
from ui_flood import (
    RANK_SCRIPT,
    SIZE,
    Probe,
    Side,
    Terminal,
    TmuxClient,
    figures,
    flood_terminal,
    kill_tmux,
    leftovers,
    merge,
    number,
    pct,
    prepare,
    print_table,
    processes_cpu,
    read_drains,
    run_side,
    side_bytes,
    side_summary,
    tmux,
)


@dataclass
class Spent:
    """What each part of a side did in the window: CPU seconds, bytes written and write calls."""

    cpu: dict[str, float] = field(default_factory=dict)
    wrote: dict[str, float] = field(default_factory=dict)
    writes: dict[str, float] = field(default_factory=dict)


class PartClock:
    """Reads the CPU and writes of named groups of processes; its first and last readings are
    the window's (a `CpuClock` reads it once at the start, once at the stop)."""

    def __init__(self, parts: dict[str, list[psutil.Process]]) -> None:
        self.parts = parts
        self._first: dict[str, tuple[float, int, int]] = {}
        self._last: dict[str, tuple[float, int, int]] = {}

    def __call__(self) -> float:
        """Take a reading; the CPU seconds of every part."""
        reading = {name: _usage(processes) for name, processes in self.parts.items()}
        self._first = self._first or reading
        self._last = reading
        return sum(cpu for cpu, _, _ in reading.values())

    def spent(self) -> Spent:
        """Each part's share of the window, between the first and the last reading."""
        spent = Spent()
        for name in self.parts:
            (cpu0, wrote0, writes0), (cpu1, wrote1, writes1) = self._first[name], self._last[name]
            spent.cpu[name], spent.wrote[name], spent.writes[name] = (
                cpu1 - cpu0,
                wrote1 - wrote0,
                writes1 - writes0,
            )
        return spent


def _usage(processes: list[psutil.Process]) -> tuple[float, int, int]:
    """CPU seconds, bytes written (to files and terminals, not sockets) and write calls."""
    wrote = writes = 0
    for process in processes:
        with contextlib.suppress(psutil.Error):
            counters = process.io_counters()
            wrote, writes = wrote + counters.write_chars, writes + counters.write_count
    return processes_cpu(processes), wrote, writes


# -- the window -----------------------------------------------------------------------------
def flood_env(results: Path, args: argparse.Namespace) -> dict[str, str]:
    """What the rank script and the ddptui it runs under need in their environment."""
    return {"UI_FLOOD_DIR": str(results), "UI_FLOOD_BYTES": str(side_bytes(args)), "PYTHONPATH": SRC}


def flood(client: TmuxClient, clock: PartClock, results: Path, args: argparse.Namespace, side: Side) -> Spent:
    """ui_flood's typing and flood in the attached client; what each part spent in the window."""
    ui = Terminal(cpu=clock, idle=lambda: caught_up(args.ranks), what="the screen")
    flood_terminal(client, ui, results, args.ranks, side)
    return clock.spent()


# -- the sides ------------------------------------------------------------------------------
class Sides:
    """Runs the two sides, keeping what each part of each round spent."""

    def __init__(self, script: Path, results: Path, args: argparse.Namespace) -> None:
        self.script, self.results, self.args = script, results, args
        self.spent: dict[str, list[Spent]] = {"direct": [], "join": []}
        self.profiles: list[str] = []

    def direct(self) -> Side:
        """The app in its own terminal."""
        side, client, started = Side("direct"), None, []
        try:
            argv = ddptui_argv("--no-session", "--nproc-per-node", str(self.args.ranks), str(self.script))
            app = open_window(argv, flood_env(self.results, self.args))
            started = [app]
            client = TmuxClient(Probe())
            typing_on_command_line()
            started += app.children(recursive=True)
            server = psutil.Process(int(tmux("display-message", "-p", "#{pid}")))
            parts = {"app": [app, *pump_of(app)], "tmux": [server, client.process]}
            with self.profiled(direct=app):
                spent = flood(client, PartClock(parts), self.results, self.args, side)
            self.spent["direct"].append(spent)
        finally:
            if client is not None:
                client.close()
            kill_tmux()  # the app's terminal hangs up: it ends its ranks
            end_all(started, side)
        read_drains(self.results, side)
        return side

    def join(self) -> Side:
        """The app of a detached session, seen through `ddptui join` in its own terminal."""
        side, client, started, session_id = Side("join"), None, [], ""
        try:
            session_id, session = start_session(
                self.script, self.args.ranks, flood_env(self.results, self.args)
            )
            started = [session, *session.children(recursive=True)]
            viewer = open_window(ddptui_argv("join", session_id), {"PYTHONPATH": SRC})
            client = TmuxClient(Probe())
            typing_on_command_line()
            started = unique([*started, viewer, *session.children(recursive=True)])
            server = psutil.Process(int(tmux("display-message", "-p", "#{pid}")))
            parts = {"app": [session, *pump_of(session)], "join": [viewer], "tmux": [server, client.process]}
            with self.profiled(session=session, join=viewer):
                spent = flood(client, PartClock(parts), self.results, self.args, side)
            self.spent["join"].append(spent)
        finally:
            if session_id:
                kill_session(session_id, side)
            if client is not None:
                client.close()
            kill_tmux()
            end_all(started, side)
        read_drains(self.results, side)
        return side

    @contextlib.contextmanager
    def profiled(self, **processes: psutil.Process) -> Iterator[None]:
        """py-spy records these processes meanwhile (with --py-spy DIR)."""
        if not self.args.py_spy:
            yield
            return
        spies = [PySpy(process.pid, Path(self.args.py_spy), name) for name, process in processes.items()]
        try:
            yield
        finally:
            for spy in spies:
                self.profiles.append(spy.stop())


# -- report ---------------------------------------------------------------------------------
def pooled(spent: list[Spent]) -> Spent:
    """The rounds' mean of each part's figures."""
    mean = Spent()
    for name in ("cpu", "wrote", "writes"):
        into = getattr(mean, name)
        for one in spent:
            for part, value in getattr(one, name).items():
                into[part] = into.get(part, 0.0) + value / len(spent)
    return mean


def rows(spent: dict[str, Spent]) -> Callable[[Side], list[tuple[str, float, str]]]:
    """ui_flood's rows of a side (those it can measure here), then what each part spent."""

    def of(side: Side) -> list[tuple[str, float, str]]:
        parts = spent[side.name]
        drew = "join" if side.name == "join" else "app"
        count = parts.writes.get(drew, math.nan)
        return [
            *(row for row in figures(side) if not row[0].startswith("key→handled")),
            ("CPU app (+pump) (s)", parts.cpu.get("app", math.nan), ".2f"),
            ("CPU join (s)", parts.cpu.get("join", math.nan), ".2f"),
            ("CPU tmux (s)", parts.cpu.get("tmux", math.nan), ".2f"),
            ("app drew (MiB)", parts.wrote.get(drew, math.nan) / 2**20, ".2f"),
            ("  in writes", count, ".0f"),
            ("  bytes a write", parts.wrote.get(drew, math.nan) / count if count else math.nan, ".0f"),
        ]

    return of


def ratio(a: float, b: float) -> float | None:
    """a / b for JSON (None when either is missing or b is 0)."""
    return number(a / b) if b and not math.isnan(a) and not math.isnan(b) else None


def summary(
    direct: Side, joined: Side, spent: dict[str, Spent], args: argparse.Namespace
) -> dict[str, object]:
    """The figures for `--json`: each side's (ui_flood's names) and the join/direct ratios."""
    sides = {
        side.name: side_summary(side)
        | {
            "cpu_by_part_s": {part: number(value) for part, value in spent[side.name].cpu.items()},
            "drew_mib": number(
                spent[side.name].wrote.get("join" if side.name == "join" else "app", 0) / 2**20
            ),
        }
        for side in (direct, joined)
    }
    return {
        "ranks": args.ranks,
        "mib": args.mib,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_before": round(args.load, 2),
        **sides,
        "ratio": {
            "key_screen_p50": ratio(pct(joined.screen_ms, 50), pct(direct.screen_ms, 50)),
            "key_screen_p99": ratio(pct(joined.screen_ms, 99), pct(direct.screen_ms, 99)),
            "key_screen_writing_p99": ratio(pct(joined.writing_ms, 99), pct(direct.writing_ms, 99)),
            "key_screen_idle_p50": ratio(pct(joined.idle_ms, 50), pct(direct.idle_ms, 50)),
            "drain_median": ratio(pct(joined.drains, 50), pct(direct.drains, 50)),
            "drain_max": ratio(max(joined.drains, default=math.nan), max(direct.drains, default=math.nan)),
            "cpu": ratio(joined.cpu, direct.cpu),
        },
    }


# -- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, help="MiB of log each rank prints (8; --quick: 1)")
    parser.add_argument("--ranks", type=int, help="rank count (8; --quick: 2)")
    parser.add_argument("--rounds", type=int, help="alternating direct/join rounds, pooled (2; --quick: 1)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 2 ranks x 1 MiB, one round")
    parser.add_argument(
        "--json", action="store_true", help="the figures as JSON on stdout (the rest on stderr)"
    )
    parser.add_argument("--py-spy", metavar="DIR", help="record the session and join processes into DIR")
    args = parser.parse_args(argv)
    args.mib = args.mib if args.mib is not None else 1 if args.quick else 8
    args.ranks = args.ranks if args.ranks is not None else 2 if args.quick else 8
    args.rounds = args.rounds if args.rounds is not None else 1 if args.quick else 2
    if args.ranks < 1 or args.mib <= 0 or args.rounds < 1:
        parser.error("need --ranks >= 1, --mib > 0 and --rounds >= 1")
    if args.py_spy and PySpy.missing():
        parser.error(f"--py-spy: {PySpy.missing()}")
    return args


def interrupted(signum: int, _: FrameType | None) -> None:
    """SIGTERM or SIGHUP end the bench as Ctrl+C does: through every `finally`."""
    raise KeyboardInterrupt(f"signal {signum}")


def run(args: argparse.Namespace, tmp: Path) -> tuple[Side, Side, dict[str, Spent]]:
    """Alternate the sides (direct first in even rounds); pool each side's rounds."""
    script, results = tmp / "flood_rank.py", tmp / "results"
    script.write_text(RANK_SCRIPT)
    results.mkdir()
    sides = Sides(script, results, args)
    rounds: dict[str, list[Side]] = {"direct": [], "join": []}
    for turn in range(args.rounds):
        for name in ("direct", "join") if turn % 2 == 0 else ("join", "direct"):
            rounds[name].append(run_side(name, getattr(sides, name), results, script))
    prepare(results)
    for profile in sides.profiles:
        print(profile)
    spent = {name: pooled(sides.spent[name]) for name in rounds}
    return merge(rounds["direct"]), merge(rounds["join"]), spent


def main(argv: list[str] | None = None) -> int:
    """Run both sides, print the table (with `--json`: on stderr, the JSON on stdout); one line
    and a non-zero status when it cannot."""
    args = parse_args(argv)
    if shutil.which("tmux") is None:
        print("bench/join.py: tmux is not installed", file=sys.stderr)
        return 2
    for name in ("COLUMNS", "LINES", "COLORTERM", "TMUX"):  # the panes' own size and colours decide
        os.environ.pop(name, None)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        return measure(args)
    except KeyboardInterrupt:
        print("bench/join.py: interrupted; every session and process it started is ended", file=sys.stderr)
        return 130
    except subprocess.CalledProcessError as exc:
        print(f"bench/join.py: {' '.join(exc.cmd[:4])} ... failed: {exc.stderr.strip()}", file=sys.stderr)
        return 1
    except (RuntimeError, TimeoutError, OSError) as exc:
        print(f"bench/join.py: {exc}", file=sys.stderr)
        return 1


def measure(args: argparse.Namespace) -> int:
    """Both sides in a fresh temp dir (the sessions' `$XDG_RUNTIME_DIR` too), then the report."""
    stdout = sys.stdout
    args.load = os.getloadavg()[0]
    with (
        contextlib.redirect_stdout(sys.stderr if args.json else stdout),
        tempfile.TemporaryDirectory(prefix="dj-", dir="/tmp") as tmp,
    ):
        os.environ["XDG_RUNTIME_DIR"] = tmp  # short (a socket path goes in it) and the bench's own
        print(f"{args.ranks} ranks x {args.mib:g} MiB, {SIZE[0]}x{SIZE[1]}, {os.cpu_count()} CPUs,", end=" ")
        print(f"load {args.load:.2f}", flush=True)
        try:
            direct, joined, spent = run(args, Path(tmp))
        finally:
            left = leftovers(Path(tmp))
            for pid in left:
                with contextlib.suppress(psutil.Error):
                    psutil.Process(pid).kill()
        if left:
            joined.notes.append(f"processes left after both sides, killed: {left}")
        print_table(joined, direct, rows(spent))
        for side in (direct, joined):
            for note in side.notes:
                print(f"note ({side.name}): {note}")
        p99 = ratio(pct(joined.screen_ms, 99), pct(direct.screen_ms, 99))
        print(f"\nkey → screen p99 through join / direct: {'-' if p99 is None else f'{p99:.2f}'}")
    if args.json:
        json.dump(summary(direct, joined, spent, args), stdout)
        stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
