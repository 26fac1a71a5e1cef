"""UI under a log flood: rank drain time, UI CPU and key → screen latency, ddptui against tmux.

N ranks (default 8) each print M MiB (default 8) of log as fast as they can, once under the
real ddptui app and once in a tmux window showing the same N ranks. Both sides run the same
plain-Python rank script (no torch, written to a temp dir):

* it waits for a `go` file, so every rank starts writing at the same moment on both sides;
* it writes realistic log lines (plain step lines, coloured INFO lines, `\\r` progress-bar
  updates) one `write(2)` per line, as a line-buffered `print` or tqdm on a terminal does;
* it records its own wall time around its writes (the **drain time**: how long the rank took to
  get its bytes out; a terminal that reads slowly stretches it, since a full pty blocks the
  writer), then stops at `breakpoint()` so a pdb prompt is on screen afterwards.

ddptui side: `DdptuiApp(...).run_test(size=(200, 50))` (headless Textual, real Session, real
ptys). The command line is focused (as after F2). A thread types keys the way Textual's own
input thread does (`run_coroutine_threadsafe(app._post_message(Key))`). `app._display` is
wrapped: headless Textual computes every frame (compositor, every `render_line`) but skips
encoding it for the terminal; the wrapper does that encoding (`render_segments`, what a real
terminal driver would write) so the CPU is a real run's, and looks for the typed character in
the bytes. Two latencies per key: **handled** (the Input inserted the character: event-loop
responsiveness) and **screen** (the first frame whose terminal bytes contain it: what a user
sees, minus the terminal emulator's own time).

tmux side: a private server (`tmux -L ddptui-bench-PID -f /dev/null`), one 200x50 window: the same
grid of rank panes as ddptui (`grid_shape`), above a 3-line pane running `cat`, the active pane.
A real tmux client is attached in a pty the bench drains, so tmux renders as it would for a user.
Keys are written to that client pty, as a terminal would, and latency is until the typed
character shows up in the client's output (kernel echo in the `cat` pane → server → client).
No process is spawned per key (unlike `send-keys`/`capture-pane`), so the two figures compare.

Each typed character is used once (Latin-extended, Greek, Cyrillic, Armenian letters; the logs
never contain them), so finding it in the output means this key's echo was drawn. Keys are typed
10-30 ms after the previous one showed (random, so as not to beat with frame timers): for 1 s
before `go` (the UI at rest: the reference), then from `go` until the UI is idle again, i.e.
while ranks write and while the UI catches up with what they wrote (a user sees both as "the
flood"). A key unseen after 2 s counts as 2000 ms and as lost. p99 is nearest-rank: with about
100 keys it is the second-worst one.

CPU: the ddptui process (`getrusage(RUSAGE_SELF)`: app, core and the bench's key thread, which
mostly sleeps) plus its pty pump process (`ddptui.core.transport.pump`, which the app uses; its share is
noted below the table) against the tmux server plus its client (`psutil`), from `go` until every rank
finished writing and the UI is idle again (ddptui: the core has every byte and no shown pane has
unemulated bytes; tmux: server under 10% of a core for 100 ms). `catch-up` is the part of that
window after the last rank's last write. `busy` is the whole machine's CPU use in the window: at
100% the ranks compete with the UI for the cores, so UI CPU shows up in the drain times; below
it, a rank that drains slowly is blocked on a full pty (a Linux pty holds about 14 KiB).

Below the table, the ddptui event loop's time in the window by callback (the bench times these
methods on their classes): the compositor's screen updates (layouts and, inside them, encoding
frames for the terminal), the panes' emulation frames, the core's pty reads (`--no-pump`: ptys
read on the loop, for comparison) or its takes from the pump's rings (the default), and full garbage
collections; wall time and the loop thread's CPU time (on a loaded machine the difference is
time spent waiting for a core, or in a pty read waiting for the tty's locks). A key waits behind
whatever runs on the loop, so the longest calls there bound what p99 can be.

How to read it: `ratio` is ddptui / tmux (lower is better for ddptui). The goals: every rank
drains at least as fast as under tmux (max and median drain ratio <= 1), and the UI answers a
key within 50 ms at p99 during the flood (`key→screen` p99 of the ddptui side). Other load on
the machine moves every figure (the load average is printed after each side): on a shared
machine use `--rounds 2` or more, which alternates the sides and pools their samples.
`--profile N` prints the ddptui side's top N functions (cProfile slows the app down about 2x: use
it to see where time goes, not for the figures). `--json` prints the figures (drain ratios,
key → screen percentiles of both sides, CPU, loop times, load averages) as one JSON object on
stdout and everything else on stderr, for scripts that collect runs. With more than 8 ranks
ddptui shows one page of 8 panes (the others are not emulated) while tmux shows every rank.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import functools
import gc
import json
import math
import os
import pstats
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import psutil
from ptyprocess import PtyProcess
from textual import events
from textual._compositor import CompositorUpdate
from textual.keys import _character_to_key
from textual.screen import Screen

from ddptui.core.session.session import Session
from ddptui.core.transport.launch import LaunchSpec
from ddptui.core.transport.local import LocalRank
from ddptui.core.transport.pump import Pump
from ddptui.ui.app import DdptuiApp, grid_shape
from ddptui.ui.command_bar import CommandBar
from ddptui.ui.rank_pane import RankPane

SIZE = (200, 50)
"""Terminal size (columns, lines) of both UIs."""
CPUS = os.sched_getaffinity(0)
"""The CPUs this process may use before ddptui pins its loop (`ddptui.core.transport.home_cpu`): the
typist's, as a terminal's (Textual's input thread starts before the pin, the bench's would not)."""
SOCKET = f"ddptui-bench-{os.getpid()}"
"""The private tmux socket name (`tmux -L`), one per run: two runs at once must not share a server."""
GOAL_MS = 50.0
"""The issue's bar for key → screen p99 during the flood."""
KEY_TIMEOUT = 2.0
"""Seconds to wait for a typed key to show before counting it lost."""
KEY_GAP = (0.010, 0.030)
"""Seconds between a key showing and the next key (uniformly random in this range)."""
IDLE_TYPING = 1.0
"""Seconds of typing into the UI at rest, before the flood: the reference latency."""
SETTLE_TIMEOUT = 30.0
"""Seconds to wait for a UI to go idle after the flood before giving up."""
RANK_SCRIPT = r'''
"""A flooding rank for bench/ui_flood.py: wait for `go`, print SIZE bytes of log, stop."""
import os, sys, time

rank, out, size = int(os.environ["RANK"]), os.environ["UI_FLOOD_DIR"], int(os.environ["UI_FLOOD_BYTES"])
lines, total, step = [], 0, 0
while total < size:
    block = [
        b"[rank%d] step %d loss=%.4f lr=0.001 grad_norm=%.3f\n" % (rank, step, 1 / (step + 1), step % 7),
        b"\x1b[32mINFO\x1b[0m \x1b[1mtrainer\x1b[0m: epoch %d batch %d done \xe2\x9c\x93\n"
        % (step // 100, step),
        b"\r%3d%%|%-20s| %d/100" % (step % 101, b"#" * (step % 21), step % 101),
        b"\n" if step % 10 == 9 else b"",
    ]
    for line in block:
        if line:
            lines.append(line)
            total += len(line)
    step += 1
open(os.path.join(out, "ready.%d" % rank), "w").close()
while not os.path.exists(os.path.join(out, "go")):
    time.sleep(0.002)
start = time.time()
for line in lines:
    while line:
        line = line[os.write(1, line):]
end = time.time()
with open(os.path.join(out, "tmp.%d" % rank), "w") as f:
    f.write("%r %r %d\n" % (start, end, total))
os.rename(os.path.join(out, "tmp.%d" % rank), os.path.join(out, "done.%d" % rank))
breakpoint()
'''


# -- results --------------------------------------------------------------------------------
@dataclass
class Side:
    """What one side measured."""

    name: str
    drains: list[float] = field(default_factory=list)
    """Seconds each rank took to write its log."""
    nbytes: int = 0
    """Bytes each rank wrote."""
    cpu: float = 0.0
    """CPU seconds of the UI process(es) in the window."""
    window: float = 0.0
    """Seconds from `go` until the UI was idle again."""
    catch_up: float = 0.0
    """Seconds from the last rank's last write until the UI was idle."""
    drawn: float = 0
    """Bytes the UI wrote for its terminal in the window."""
    loop: LoopTimes | None = None
    """Where the app's event loop spent the window (ddptui only)."""
    busy: float = 0.0
    """Fraction of the whole machine's CPU in use during the window."""
    screen_ms: list[float] = field(default_factory=list)
    """Key → first output containing it, ms."""
    sent_at: list[float] = field(default_factory=list)
    """When each of those keys was sent (`time.time()`, the clock of the ranks' end stamps)."""
    writing_ms: list[float] = field(default_factory=list)
    """Key → screen of the keys sent while a rank was still writing, ms."""
    handled_ms: list[float] = field(default_factory=list)
    """Key → handled by the app (ddptui only), ms."""
    lost: int = 0
    """Keys not seen within KEY_TIMEOUT."""
    idle_ms: list[float] = field(default_factory=list)
    """Key → screen before the flood, ms."""
    ran_out: bool = False
    """The unique keys ran out before the window ended."""
    notes: list[str] = field(default_factory=list)
    loads: list[float] = field(default_factory=list)
    """The 1-minute load average after each round of this side."""

    @property
    def rates(self) -> list[float]:
        """MiB/s of each rank."""
        return [self.nbytes / 2**20 / d for d in self.drains]


def pct(values: list[float], q: float) -> float:
    """The nearest-rank q-th percentile (nan when empty)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def key_pool() -> list[str]:
    """Narrow printable letters that no log line contains, each typed at most once."""
    ranges = [(0x100, 0x24F), (0x391, 0x3A1), (0x3A3, 0x3A9), (0x3B1, 0x3C9), (0x410, 0x44F)]
    ranges += [(0x531, 0x556), (0x561, 0x586), (0x1E00, 0x1EFF)]
    return [chr(c) for lo, hi in ranges for c in range(lo, hi + 1) if chr(c).isprintable()]


class CpuClock:
    """CPU seconds of some processes plus the machine's busy fraction, between start and stop."""

    def __init__(self, read: Callable[[], float]) -> None:
        self._read = read
        self._cpu = 0.0
        self._wall = 0.0
        self._machine: psutil._common.scputimes | None = None

    def start(self) -> None:
        """Take the starting readings."""
        self._cpu, self._wall, self._machine = self._read(), time.monotonic(), psutil.cpu_times()

    def stop(self, side: Side) -> None:
        """Store CPU seconds, window and machine busy fraction in `side`."""
        side.cpu, side.window = self._read() - self._cpu, time.monotonic() - self._wall
        now, then = psutil.cpu_times(), self._machine
        assert then is not None
        total = sum(now) - sum(then)
        side.busy = 1 - (now.idle - then.idle) / total if total > 0 else math.nan


def self_cpu() -> float:
    """CPU seconds of this process, every thread."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# -- the rank files -------------------------------------------------------------------------
def prepare(results: Path) -> None:
    """Empty the results dir between sides."""
    for path in results.iterdir():
        path.unlink()


def count(results: Path, prefix: str) -> int:
    """How many rank files with this prefix exist."""
    return sum(1 for p in results.iterdir() if p.name.startswith(prefix + "."))


def read_drains(results: Path, side: Side) -> None:
    """Read every rank's start/end/bytes into `side`; pick the keys typed before the last end."""
    last = 0.0
    for path in sorted(results.glob("done.*")):
        start, end, nbytes = path.read_text().split()
        side.drains.append(float(end) - float(start))
        side.nbytes = int(nbytes)
        last = max(last, float(end))
    side.writing_ms = [ms for ms, sent in zip(side.screen_ms, side.sent_at, strict=True) if sent < last]


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll `condition` every 10 ms; raise after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


# -- typing keys ----------------------------------------------------------------------------
class Probe:
    """Watches UI output for the one character typed last; stamps when it shows."""

    def __init__(self) -> None:
        self._want = b""
        self._seen = threading.Event()
        self._carry = b""
        self.shown_at = 0.0
        self.drawn = 0
        """Bytes of terminal output seen (reset at `go`)."""

    def expect(self, char: str) -> None:
        """The next key to look for."""
        self._want, self.shown_at = char.encode(), 0.0
        self._seen.clear()

    def saw(self, data: bytes) -> None:
        """Output went to the terminal; stamp if it contains the awaited character."""
        self.drawn += len(data)
        if self._want and self._want in self._carry + data:
            self.shown_at, self._want = time.perf_counter(), b""
            self._seen.set()
        self._carry = data[-4:]

    def wait(self, timeout: float) -> bool:
        """Wait until the awaited character showed."""
        return self._seen.wait(timeout)


class Typist:
    """Types unique characters one at a time, each when the last one showed; times key → screen."""

    def __init__(self, send: Callable[[str], None], probe: Probe) -> None:
        self.send, self.probe = send, probe
        self.ran_out = False
        self._keys = iter(key_pool())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._result: tuple[list[float], int] = ([], 0)
        self.sent_at: list[float] = []
        """When each key since `start` was sent (`time.time()`)."""

    def idle(self, seconds: float) -> list[float]:
        """Type for `seconds` (blocking): latencies of the UI at rest."""
        stop = threading.Event()
        threading.Timer(seconds, stop.set).start()
        return self._type(stop)[0]

    def start(self) -> None:
        """Type in a thread until `finish`."""

        def run() -> None:
            self.sent_at = []
            self._result = self._type(self._stop)

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def finish(self) -> tuple[list[float], int]:
        """Stop typing; the latencies (ms) since `start` and how many keys never showed."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        return self._result

    def _type(self, stop: threading.Event) -> tuple[list[float], int]:
        """Type until `stop` is set (or the unique keys run out), from any CPU."""
        os.sched_setaffinity(0, CPUS)
        latencies: list[float] = []
        lost = 0
        for char in self._keys:
            if stop.wait(random.uniform(*KEY_GAP)):
                return latencies, lost
            self.probe.expect(char)
            sent = time.perf_counter()
            self.sent_at.append(time.time())
            self.send(char)
            seen = self.probe.wait(KEY_TIMEOUT)
            latencies.append((self.probe.shown_at - sent) * 1000 if seen else KEY_TIMEOUT * 1000)
            lost += not seen
        self.ran_out = True
        return latencies, lost


# -- ddptui side ----------------------------------------------------------------------------
class Keyboard:
    """Types into the app as Textual's input thread does, and stamps when the Input takes a key."""

    def __init__(self, app: DdptuiApp, loop: asyncio.AbstractEventLoop) -> None:
        self.app, self.loop = app, loop
        self.sent = 0.0
        self.handled: list[float] = []
        """Key → inserted into the Input, ms."""
        line = app.query_one(CommandBar).input
        insert = line.insert_text_at_cursor

        def stamped(text: str) -> None:
            insert(text)
            self.handled.append((time.perf_counter() - self.sent) * 1000)

        line.insert_text_at_cursor = stamped

    def send(self, char: str) -> None:
        """Post a key event from this (non-loop) thread."""
        event = events.Key(_character_to_key(char), char)
        event.set_sender(self.app)
        self.sent = time.perf_counter()
        asyncio.run_coroutine_threadsafe(self.app._post_message(event), self.loop)


class LoopTimes:
    """Time spent in the app's main event-loop callbacks, by kind (patched on their classes)."""

    KINDS: ClassVar[dict[str, tuple[type, str]]] = {
        "compositor (screen update)": (Screen, "_on_timer_update"),
        "  of which layouts": (Screen, "_refresh_layout"),
        "pane emulation (_frame)": (RankPane, "_frame"),
        "core pty reads (_drain)": (LocalRank, "_drain"),
        "core ring takes (Pump._take_turns)": (Pump, "_take_turns"),
    }
    ENCODING = "  of which terminal encoding"
    """Not patched: timed by `encode_frames` (inside the compositor's screen update)."""
    GC = "garbage collections (gen 2)"
    """Not patched: timed by a `gc.callbacks` hook; a full collection stops whatever runs (it may
    fall inside any of the calls above)."""
    ORDER = (*list(KINDS)[:2], ENCODING, *list(KINDS)[2:], GC)

    def __init__(self) -> None:
        self.total = dict.fromkeys(self.ORDER, 0.0)
        self.longest = dict.fromkeys(self.ORDER, 0.0)
        self.calls = dict.fromkeys(self.ORDER, 0)
        self.cpu_total = dict.fromkeys(self.ORDER, 0.0)
        """CPU seconds of the loop's thread in those calls (wall time also counts waiting for a
        core on a loaded machine; this does not)."""
        self.cpu_longest = dict.fromkeys(self.ORDER, 0.0)
        self.counting = False
        self._saved = {kind: getattr(cls, name) for kind, (cls, name) in self.KINDS.items()}

    def __enter__(self) -> LoopTimes:
        for kind, (cls, name) in self.KINDS.items():
            setattr(cls, name, self._timed(kind, self._saved[kind]))
        gc.callbacks.append(self._collection)
        return self

    def __exit__(self, *exc: object) -> None:
        for kind, (cls, name) in self.KINDS.items():
            setattr(cls, name, self._saved[kind])
        gc.callbacks.remove(self._collection)

    _gc_began: tuple[float, float] = (0.0, 0.0)

    def _collection(self, phase: str, info: dict[str, int]) -> None:
        """Time full (generation 2) collections."""
        if info["generation"] != 2:
            return
        if phase == "start":
            self._gc_began = (time.perf_counter(), time.thread_time())
        elif self.counting:
            wall, cpu = self._gc_began
            self.add(self.GC, time.perf_counter() - wall, time.thread_time() - cpu)

    def _timed(self, kind: str, method: Callable[..., object]) -> Callable[..., object]:
        """`method`, adding its duration to `kind`."""

        @functools.wraps(method)
        def timed(*args: object, **kwargs: object) -> object:
            began, began_cpu = time.perf_counter(), time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                if self.counting:
                    self.add(kind, time.perf_counter() - began, time.thread_time() - began_cpu)

        return timed

    def add(self, kind: str, spent: float, cpu: float) -> None:
        """Count one call of `kind`: `spent` wall seconds, `cpu` of them on the CPU."""
        self.total[kind] += spent
        self.longest[kind] = max(self.longest[kind], spent)
        self.cpu_total[kind] += cpu
        self.cpu_longest[kind] = max(self.cpu_longest[kind], cpu)
        self.calls[kind] += 1

    def reset(self) -> None:
        """Start counting from zero, now."""
        for kind in self.ORDER:
            self.total[kind], self.longest[kind], self.calls[kind] = 0.0, 0.0, 0
            self.cpu_total[kind], self.cpu_longest[kind] = 0.0, 0.0
        self.counting = True


def encode_frames(app: DdptuiApp, probe: Probe, loop_times: LoopTimes) -> None:
    """Make headless `_display` encode each frame for a terminal, as a real driver would."""
    console = app.console

    def display(screen: object, renderable: object) -> None:
        if renderable is None or app._batch_count:
            return
        began, began_cpu = time.perf_counter(), time.thread_time()
        if isinstance(renderable, CompositorUpdate):
            text = renderable.render_segments(console)
        else:
            text = console._render_buffer(console.render(renderable))
        data = text.encode()
        if loop_times.counting:
            loop_times.add(loop_times.ENCODING, time.perf_counter() - began, time.thread_time() - began_cpu)
        probe.saw(data)

    app._display = display


def ddptui_idle(app: DdptuiApp, nbytes: int) -> bool:
    """The core has every byte and no pane has output left to emulate."""
    ranks = app.session.ranks
    drained = all(rank.output.end >= nbytes for rank in ranks)
    return drained and not any(pane.terminal.pending for pane in app.panes if pane.display)


async def poll(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Await `condition` (checked every 20 ms); raise after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def flood_ddptui(
    app: DdptuiApp, results: Path, args: argparse.Namespace, side: Side, loop_times: LoopTimes
) -> None:
    """With the app up: type at rest, start the flood, type until the app caught up."""
    await poll(lambda: count(results, "ready") == args.ranks, 60, "ranks to be ready")
    app.query_one(CommandBar).input.focus()
    await asyncio.sleep(0.3)
    probe = Probe()
    keyboard = Keyboard(app, asyncio.get_running_loop())
    encode_frames(app, probe, loop_times)
    typist = Typist(keyboard.send, probe)
    side.idle_ms = await asyncio.to_thread(typist.idle, IDLE_TYPING)
    pump = pump_cpu(app) or (lambda: 0.0)
    clock, pump_clock = CpuClock(lambda: self_cpu() + pump()), CpuClock(pump)
    clock.start()
    pump_clock.start()
    probe.drawn, keyboard.handled = 0, []
    loop_times.reset()
    (results / "go").touch()
    typist.start()
    await poll(lambda: count(results, "done") == args.ranks, 600, "ranks to finish writing")
    await settle_ddptui(app, side_bytes(args), side)
    clock.stop(side)
    pumped = Side("pump")
    pump_clock.stop(pumped)
    if pump_cpu(app) is not None:
        side.notes.append(f"UI CPU includes the pty pump process: {pumped.cpu:.2f} s")
    loop_times.counting = False
    side.drawn, side.handled_ms = probe.drawn, keyboard.handled
    side.screen_ms, side.lost = await asyncio.to_thread(typist.finish)
    side.sent_at = typist.sent_at
    side.ran_out = typist.ran_out


async def settle_ddptui(app: DdptuiApp, nbytes: int, side: Side) -> None:
    """Wait until the app caught up with the flood (or note that it did not); time it."""
    flooded = time.monotonic()
    try:
        await poll(lambda: ddptui_idle(app, nbytes), SETTLE_TIMEOUT, "ddptui to catch up")
    except TimeoutError:
        side.notes.append(f"panes still had output to emulate {SETTLE_TIMEOUT:.0f} s after the flood")
    side.catch_up = time.monotonic() - flooded


def side_bytes(args: argparse.Namespace) -> int:
    """Bytes of log each rank writes."""
    return int(args.mib * 2**20)


async def run_ddptui_app(script: Path, results: Path, args: argparse.Namespace) -> Side:
    """Run the flood under the headless app; end it and check no rank survives."""
    side = Side("ddptui")
    env = {"UI_FLOOD_DIR": str(results), "UI_FLOOD_BYTES": str(side_bytes(args))}
    pump = False if args.no_pump else None  # None: the app's choice
    spec = LaunchSpec(target=str(script), nproc=args.ranks, stall_timeout=60, env=env, pump=pump)
    app = DdptuiApp(Session(spec))
    try:
        with LoopTimes() as side.loop:  # before the app starts: timers and readers bind methods
            async with app.run_test(size=SIZE):
                await flood_ddptui(app, results, args, side, side.loop)
                app.shutdown()
                await poll(lambda: not app.session.live(range(args.ranks)), 10, "ranks to end")
    finally:
        app.session.kill_now()
    pids = [r.transport.pid for r in app.session.ranks if isinstance(r.transport, LocalRank)]
    survivors = [pid for pid in pids if alive(pid)]
    if survivors:
        side.notes.append(f"rank processes still alive after the app ended: {survivors}")
    read_drains(results, side)
    return side


def run_ddptui(script: Path, results: Path, args: argparse.Namespace) -> Side:
    """The ddptui side, optionally under cProfile."""
    if not args.profile:
        return asyncio.run(run_ddptui_app(script, results, args))
    profiler = cProfile.Profile()
    side = profiler.runcall(asyncio.run, run_ddptui_app(script, results, args))
    print(f"\n-- ddptui side profile (top {args.profile} by own time, then cumulative) --")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(args.profile)
    stats.sort_stats("cumulative").print_stats(args.profile)
    return side


def alive(pid: int) -> bool:
    """True if `pid` runs (a zombie does not count)."""
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


# -- tmux side ------------------------------------------------------------------------------
def tmux(*args: str) -> str:
    """Run a tmux command on the bench's private server; return its stdout."""
    command = ["tmux", "-L", SOCKET, "-f", "/dev/null", *args]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()


def rank_command(script: Path, results: Path, rank: int, nbytes: int) -> list[str]:
    """tmux options and command that run one rank in a new pane."""
    env = [f"RANK={rank}", f"UI_FLOOD_DIR={results}", f"UI_FLOOD_BYTES={nbytes}"]
    return [*(x for e in env for x in ("-e", e)), "-P", "-F", "#{pane_id}", sys.executable, str(script)]


def split(pane: str, flag: str, ranks: list[int], command: Callable[[int], list[str]]) -> list[str]:
    """Split `pane` evenly along `flag` (-v rows, -h columns) into it plus a pane per rank."""
    panes = [pane]
    for made, rank in enumerate(ranks):
        left = len(ranks) - made
        percent = round(100 * left / (left + 1))
        panes.append(tmux("split-window", flag, "-t", panes[-1], "-l", f"{percent}%", *command(rank)))
    return panes


def build_window(script: Path, results: Path, ranks: int, nbytes: int) -> None:
    """One window: the ranks in ddptui's grid, above a 3-line `cat` pane (the active pane)."""
    columns, rows = grid_shape(ranks)

    def command(rank: int) -> list[str]:
        return rank_command(script, results, rank, nbytes)

    first = tmux("new-session", "-d", "-s", "bench", "-x", str(SIZE[0]), "-y", str(SIZE[1]), *command(0))
    typing = tmux("split-window", "-v", "-t", first, "-l", "3", "-P", "-F", "#{pane_id}", "cat")
    heads = split(first, "-v", [r * columns for r in range(1, rows) if r * columns < ranks], command)
    for row, head in enumerate(heads):
        split(head, "-h", list(range(row * columns + 1, min((row + 1) * columns, ranks))), command)
    tmux("select-pane", "-t", typing)


class TmuxClient:
    """An attached tmux client in a pty, drained by a thread that shows its output to a Probe."""

    def __init__(self, probe: Probe) -> None:
        env = dict(os.environ, TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        env.pop("TMUX", None)
        argv = ["tmux", "-L", SOCKET, "-u", "attach", "-t", "bench"]
        self.proc = PtyProcess.spawn(argv, env=env, dimensions=(SIZE[1], SIZE[0]))
        self.process = psutil.Process(self.proc.pid)
        self.probe = probe
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        """Read everything tmux draws, as fast as it comes."""
        while True:
            try:
                data = os.read(self.proc.fd, 65536)
            except OSError:
                return
            if not data:
                return
            self.probe.saw(data)

    def send(self, char: str) -> None:
        """Type a character, as the user's terminal would."""
        os.write(self.proc.fd, char.encode())

    def close(self) -> None:
        """End the client."""
        if self.proc.isalive():
            self.proc.terminate(force=True)
        self._thread.join(2)


def pump_cpu(app: DdptuiApp) -> Callable[[], float] | None:
    """How to read the CPU seconds of the session's pty pump process (None: no pump)."""
    job = app.session.resources.job
    if job is None or job.pump is None:
        return None
    process = psutil.Process(job.pump.process.pid)
    return lambda: process_cpu(process)


def process_cpu(process: psutil.Process) -> float:
    """CPU seconds of a process (0 once it is gone)."""
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


@dataclass
class Terminal:
    """What draws a UI in a tmux client's terminal: how to read its CPU, and when it is idle."""

    cpu: Callable[[], float]
    """CPU seconds of the processes that draw (the window's CPU figure)."""
    idle: Callable[[], bool]
    """Whether they went idle (takes about 100 ms to say)."""
    what: str
    """Them, in words (for a note when they do not go idle)."""


def processes_cpu(processes: list[psutil.Process]) -> float:
    """CPU seconds of some processes (those gone count 0)."""
    return sum(process_cpu(process) for process in processes)


def processes_idle(processes: list[psutil.Process]) -> bool:
    """True when these processes together used under 10% of a core over 100 ms."""
    before = processes_cpu(processes)
    time.sleep(0.1)
    return processes_cpu(processes) - before < 0.01


def flood_tmux(client: TmuxClient, server: psutil.Process, results: Path, ranks: int, side: Side) -> None:
    """With the window up and a client attached: type at rest, flood, type until tmux is idle."""
    ui = Terminal(
        cpu=lambda: processes_cpu([server, client.process]),
        idle=lambda: processes_idle([server]),
        what="tmux server",
    )
    flood_terminal(client, ui, results, ranks, side)


def flood_terminal(client: TmuxClient, ui: Terminal, results: Path, ranks: int, side: Side) -> None:
    """With the UI up in the attached client: type at rest, flood, type until the UI is idle."""
    wait_for(lambda: count(results, "ready") == ranks and client.probe.drawn > 0, 60, "tmux ranks")
    time.sleep(0.3)
    typist = Typist(client.send, client.probe)
    side.idle_ms = typist.idle(IDLE_TYPING)
    clock = CpuClock(ui.cpu)
    clock.start()
    client.probe.drawn = 0
    (results / "go").touch()
    typist.start()
    wait_for(lambda: count(results, "done") == ranks, 600, "ranks to finish writing")
    settle_terminal(ui, side)
    clock.stop(side)
    side.drawn = client.probe.drawn
    side.screen_ms, side.lost = typist.finish()
    side.sent_at = typist.sent_at
    side.ran_out = typist.ran_out


def settle_terminal(ui: Terminal, side: Side) -> None:
    """Wait until the UI went idle (or note that it did not); time it."""
    flooded = time.monotonic()
    try:
        wait_for(ui.idle, SETTLE_TIMEOUT, f"{ui.what} to go idle")
    except TimeoutError:
        side.notes.append(f"{ui.what} still busy {SETTLE_TIMEOUT:.0f} s after the flood")
    side.catch_up = time.monotonic() - flooded


def run_tmux(script: Path, results: Path, args: argparse.Namespace) -> Side:
    """Run the flood in a private tmux server with an attached client; kill the server after."""
    side, client = Side("tmux"), None
    try:
        build_window(script, results, args.ranks, side_bytes(args))
        server = psutil.Process(int(tmux("display-message", "-p", "#{pid}")))
        client = TmuxClient(Probe())
        flood_tmux(client, server, results, args.ranks, side)
    finally:
        if client is not None:
            client.close()
        kill_tmux()
    read_drains(results, side)
    return side


def kill_tmux() -> None:
    """End the bench's private tmux server (if it runs) and remove its socket."""
    subprocess.run(["tmux", "-L", SOCKET, "kill-server"], capture_output=True, check=False)
    socket_dir = Path(os.environ.get("TMUX_TMPDIR") or "/tmp", f"tmux-{os.getuid()}")
    socket_dir.joinpath(SOCKET).unlink(missing_ok=True)  # tmux 3.3 leaves it behind


# -- report ---------------------------------------------------------------------------------
def leftovers(script: Path, grace: float = 3.0) -> list[int]:
    """Pids of processes still running the rank script after up to `grace` seconds."""
    deadline = time.monotonic() + grace
    while True:
        found = []
        for process in psutil.process_iter(["pid", "cmdline"]):
            if any(str(script) in part for part in process.info["cmdline"] or ()):
                found.append(process.info["pid"])
        found = [pid for pid in found if alive(pid)]
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def figures(side: Side) -> list[tuple[str, float, str]]:
    """(label, value, format) rows of one side; ratios are taken row by row."""
    cpu_pct = 100 * side.cpu / side.window if side.window else math.nan
    return [
        ("rank drain median (s)", pct(side.drains, 50), ".2f"),
        ("rank drain max (s)", max(side.drains, default=math.nan), ".2f"),
        ("rank rate median (MiB/s)", pct(side.rates, 50), ".2f"),
        ("rank rate min (MiB/s)", min(side.rates, default=math.nan), ".2f"),
        ("UI CPU (s)", side.cpu, ".2f"),
        ("window go→idle (s)", side.window, ".2f"),
        ("catch-up after flood (s)", side.catch_up, ".2f"),
        ("output to terminal (MiB)", side.drawn / 2**20, ".2f"),
        ("UI CPU (% of a core)", cpu_pct, ".0f"),
        ("machine busy (%)", 100 * side.busy, ".0f"),
        ("key→screen at rest p50 (ms)", pct(side.idle_ms, 50), ".1f"),
        ("key→screen p50 (ms)", pct(side.screen_ms, 50), ".1f"),
        ("key→screen p99 (ms)", pct(side.screen_ms, 99), ".1f"),
        ("key→screen max (ms)", max(side.screen_ms, default=math.nan), ".1f"),
        ("  p99 while ranks write", pct(side.writing_ms, 99), ".1f"),
        ("key→handled p50 (ms)", pct(side.handled_ms, 50), ".1f"),
        ("key→handled p99 (ms)", pct(side.handled_ms, 99), ".1f"),
        ("keys typed / lost", len(side.screen_ms), "d"),
    ]


def cell(value: float, fmt: str) -> str:
    """A table cell; "-" for a missing value."""
    return "-" if isinstance(value, float) and math.isnan(value) else format(value, fmt)


def print_table(
    ours: Side,
    theirs: Side,
    rows: Callable[[Side], list[tuple[str, float, str]]] = figures,
) -> None:
    """The side-by-side figures (`rows` of each side) with ours/theirs ratios."""
    print(f"\n{'':<26} {ours.name:>10} {theirs.name:>10} {'ratio':>8}")
    for (label, a, fmt), (_, b, _) in zip(rows(ours), rows(theirs), strict=True):
        ratio = a / b if b and not math.isnan(a) and not math.isnan(b) else math.nan
        if fmt == "d":
            print(f"{label:<26} {f'{a}/{ours.lost}':>10} {f'{b}/{theirs.lost}':>10}")
            continue
        print(f"{label:<26} {cell(a, fmt):>10} {cell(b, fmt):>10} {cell(ratio, '.2f'):>8}")


def print_loop(side: Side) -> None:
    """Where the app's event loop spent the window: what a key waits behind."""
    loop = side.loop
    if loop is None or not side.window:
        return
    print(f"\nddptui event loop in the {side.window:.1f} s window:", end="")
    print("  total s  % of window  calls  longest ms   CPU s  longest CPU ms")
    for kind in loop.ORDER:
        share = 100 * loop.total[kind] / side.window
        longest, cpu_longest = 1000 * loop.longest[kind], 1000 * loop.cpu_longest[kind]
        print(
            f"  {kind:<27} {loop.total[kind]:7.2f} {share:12.0f} {loop.calls[kind]:6d} {longest:11.1f}",
            end="",
        )
        print(f" {loop.cpu_total[kind]:7.2f} {cpu_longest:15.1f}")


def print_verdicts(ours: Side, theirs: Side) -> None:
    """The issue's two goals, met or missed, with the deciding figures."""
    worst = max(ours.drains) / max(theirs.drains)
    median = pct(ours.drains, 50) / pct(theirs.drains, 50)
    drains_ok = worst <= 1.0 and median <= 1.0
    word = "met" if drains_ok else "MISSED"
    print(f"\ngoal 1, ranks drain at least as fast as under tmux: {word}", end=" ")
    print(f"(drain time ddptui/tmux: max {worst:.2f}, median {median:.2f}; ≤1 is the goal)")
    p99 = pct(ours.screen_ms, 99)
    word = "met" if p99 <= GOAL_MS and not ours.lost else "MISSED"
    print(f"goal 2, key → screen p99 ≤ {GOAL_MS:.0f} ms during the flood: {word}", end=" ")
    print(f"(ddptui p99 {p99:.1f} ms over {len(ours.screen_ms)} keys, {ours.lost} lost)")
    for side in (ours, theirs):
        if side.ran_out:
            side.notes.append("the unique keys ran out: keys were typed in part of the window only")
        for note in side.notes:
            print(f"note ({side.name}): {note}")


def merge(rounds: list[Side]) -> Side:
    """Pool the rounds of one side: samples together; CPU, windows and loop times averaged."""
    if len(rounds) == 1:
        return rounds[0]
    pooled, share = Side(rounds[0].name, nbytes=rounds[0].nbytes), 1 / len(rounds)
    for side in rounds:
        for name in ("drains", "screen_ms", "writing_ms", "handled_ms", "idle_ms", "notes", "loads"):
            getattr(pooled, name).extend(getattr(side, name))
        pooled.lost, pooled.ran_out = pooled.lost + side.lost, pooled.ran_out or side.ran_out
        for name in ("cpu", "window", "catch_up", "drawn"):
            setattr(pooled, name, getattr(pooled, name) + getattr(side, name) * share)
        pooled.busy += side.busy * side.window / sum(r.window for r in rounds)
        pooled.loop = merge_loop(pooled.loop, side.loop, share)
    return pooled


def merge_loop(pooled: LoopTimes | None, side: LoopTimes | None, share: float) -> LoopTimes | None:
    """Add `share` of a round's loop times to the pooled ones."""
    if side is None:
        return pooled
    pooled = pooled or LoopTimes()
    for kind in side.ORDER:
        pooled.total[kind] += side.total[kind] * share
        pooled.calls[kind] += round(side.calls[kind] * share)
        pooled.longest[kind] = max(pooled.longest[kind], side.longest[kind])
        pooled.cpu_total[kind] += side.cpu_total[kind] * share
        pooled.cpu_longest[kind] = max(pooled.cpu_longest[kind], side.cpu_longest[kind])
    return pooled


# -- main -----------------------------------------------------------------------------------
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=8, help="MiB of log each rank prints (8)")
    parser.add_argument("--ranks", type=int, default=8, help="rank count (8)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating ddptui/tmux rounds, pooled (1)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="cProfile the ddptui side")
    parser.add_argument(
        "--no-pump",
        action="store_true",
        help="read the ranks' ptys on the app's loop, not in the pump process (the old way, for comparison)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the figures as one JSON object on stdout (the rest to stderr)",
    )
    args = parser.parse_args(argv)
    if args.ranks < 1 or args.mib <= 0 or args.rounds < 1:
        parser.error("need --ranks >= 1, --mib > 0 and --rounds >= 1")
    return args


def run_side(name: str, run: Callable[[], Side], results: Path, script: Path) -> Side:
    """Run one side on an empty results dir, then check that no rank process is left."""
    prepare(results)
    started = time.monotonic()
    side = run()
    took = time.monotonic() - started
    side.loads.append(os.getloadavg()[0])
    print(f"{name:>6}: {took:5.1f} s, max drain {max(side.drains, default=math.nan):.2f} s,", end=" ")
    print(f"key p99 {pct(side.screen_ms, 99):.0f} ms, load {os.getloadavg()[0]:.2f}", flush=True)
    left = leftovers(script)
    if left:
        side.notes.append(f"rank processes left after the run: {left}")
    return side


def run_rounds(script: Path, results: Path, args: argparse.Namespace) -> tuple[Side, Side]:
    """Alternate the sides (ddptui first in even rounds), then pool each side's rounds."""
    rounds: dict[str, list[Side]] = {"ddptui": [], "tmux": []}
    runners = {"ddptui": run_ddptui, "tmux": run_tmux}
    for number in range(args.rounds):
        for name in ("ddptui", "tmux") if number % 2 == 0 else ("tmux", "ddptui"):
            run = functools.partial(runners[name], script, results, args)
            rounds[name].append(run_side(name, run, results, script))
    return merge(rounds["ddptui"]), merge(rounds["tmux"])


def number(value: float) -> float | None:
    """A figure for JSON: rounded, None when missing."""
    return None if math.isnan(value) else round(value, 4)


def side_summary(s: Side) -> dict[str, object]:
    """One side's figures for JSON: drain, CPU, windows, key → screen percentiles, notes."""
    return {
        "drain_median_s": number(pct(s.drains, 50)),
        "drain_max_s": number(max(s.drains, default=math.nan)),
        "cpu_s": number(s.cpu),
        "window_s": number(s.window),
        "catch_up_s": number(s.catch_up),
        "machine_busy": number(s.busy),
        "key_screen_idle_p50_ms": number(pct(s.idle_ms, 50)),
        "key_screen_p50_ms": number(pct(s.screen_ms, 50)),
        "key_screen_p99_ms": number(pct(s.screen_ms, 99)),
        "key_screen_max_ms": number(max(s.screen_ms, default=math.nan)),
        "key_screen_writing_p99_ms": number(pct(s.writing_ms, 99)),
        "keys": len(s.screen_ms),
        "keys_lost": s.lost,
        "load_after": [round(x, 2) for x in s.loads],
        "notes": s.notes,
    }


def summary(ours: Side, theirs: Side, args: argparse.Namespace, load: float) -> dict[str, object]:
    """The figures another script collects (`--json`): goals, latencies, drain and CPU ratios."""

    def ratio(a: float, b: float) -> float | None:
        return number(a / b) if b and not math.isnan(a) and not math.isnan(b) else None

    figures = {
        "ranks": args.ranks,
        "mib": args.mib,
        "rounds": args.rounds,
        "cpus": os.cpu_count(),
        "load_before": round(load, 2),
        "drain_ratio_median": ratio(pct(ours.drains, 50), pct(theirs.drains, 50)),
        "drain_ratio_max": ratio(max(ours.drains, default=math.nan), max(theirs.drains, default=math.nan)),
        "cpu_ratio": ratio(ours.cpu, theirs.cpu),
        "ddptui": side_summary(ours) | {"key_handled_p50_ms": number(pct(ours.handled_ms, 50))},
        "tmux": side_summary(theirs),
    }
    if ours.loop is not None:
        loop = ours.loop
        figures["ddptui_loop"] = {
            kind.strip(): {
                "total_s": round(loop.total[kind], 4),
                "cpu_s": round(loop.cpu_total[kind], 4),
                "calls": loop.calls[kind],
                "longest_ms": round(1000 * loop.longest[kind], 2),
                "longest_cpu_ms": round(1000 * loop.cpu_longest[kind], 2),
            }
            for kind in loop.ORDER
        }
    p99 = pct(ours.screen_ms, 99)
    ratios = (figures["drain_ratio_median"], figures["drain_ratio_max"])
    figures["goal_drain_met"] = all(r is not None and r <= 1.0 for r in ratios)
    figures["goal_latency_met"] = bool(p99 <= GOAL_MS and not ours.lost)
    return figures


def main() -> None:
    """Run both sides, print the table and the verdicts (with `--json`: to stderr, JSON on stdout)."""
    args = parse_args()
    if shutil.which("tmux") is None:
        sys.exit("tmux is not installed")
    stdout = sys.stdout
    with contextlib.redirect_stdout(sys.stderr if args.json else stdout):
        load = os.getloadavg()[0]
        with tempfile.TemporaryDirectory(prefix="ui-flood-") as tmp:
            script, results = Path(tmp, "flood_rank.py"), Path(tmp, "results")
            script.write_text(RANK_SCRIPT)
            results.mkdir()
            print(
                f"{args.ranks} ranks x {args.mib:g} MiB, {SIZE[0]}x{SIZE[1]}, {os.cpu_count()} CPUs,", end=" "
            )
            print(f"load {load:.2f}", flush=True)
            ours, theirs = run_rounds(script, results, args)
        print_table(ours, theirs)
        print_loop(ours)
        print_verdicts(ours, theirs)
    if args.json:
        json.dump(summary(ours, theirs, args, load), stdout)
        stdout.write("\n")


if __name__ == "__main__":
    main()
