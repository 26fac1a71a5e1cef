"""Terminal emulation throughput: TermScreen against stock pyte and raw byte draining.

The same synthetic rank log (plain training lines, coloured log lines, a `\\r` progress bar, some
UTF-8) goes through:

* raw: appending 4 KiB reads to a bytearray, as the core drains a pty (the baseline);
* pyte Screen / pyte HistoryScreen: stock pyte 0.8.2 with a ByteStream;
* TermScreen: `feed` everything, then `process` until nothing is pending (every byte emulated);
* TermScreen flood: the same with the default pending cap, past which `skip_ahead` drops what
  cannot show (exactly: the final screen is the one full emulation gives), as a pane off screen
  does when a rank floods it: the time until the final screen is right;
* TermScreen skip: `skip_ahead` before every `process`, as a flooded pane on screen does for each
  repaint;
* render: `line_runs` for every row of a full screen, what a pane repaint costs before Textual.

Stock pyte is slow, so it runs on a `--sample-mib` prefix; rates are per MiB either way.
`vs raw` is how many times slower than draining; `vs pyte` is how many times faster than stock
`pyte.Screen`. Figures vary with the machine: compare ratios from one run, not across machines.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import pyte

from ddptui.term.screen import TermScreen

CHUNK = 4096
"""Bytes per simulated pty read."""


def make_log(size: int) -> bytes:
    """A rank-like log of at least `size` bytes."""
    parts: list[bytes] = []
    total, step = 0, 0
    while total < size:
        block = [
            b"[rank0] step %d loss=%.4f lr=0.001 grad_norm=%.3f\r\n" % (step, 1 / (step + 1), step % 7),
            b"\x1b[32mINFO\x1b[0m \x1b[1mtrainer\x1b[0m: epoch %d batch %d done \xe2\x9c\x93\r\n"
            % (step // 100, step),
            b"\r%3d%%|%-20s| %d/100" % (step % 101, b"#" * (step % 21), step % 101),
            b"\r\n" if step % 10 == 9 else b"",
        ]
        for part in block:
            parts.append(part)
            total += len(part)
        step += 1
    return b"".join(parts)


def rate(label: str, data: bytes, run: Callable[[bytes], None]) -> float:
    """Run `run(data)`, print and return its MiB/s."""
    started = time.perf_counter()
    run(data)
    elapsed = time.perf_counter() - started
    mib_s = len(data) / elapsed / 2**20
    print(f"{label:<22} {len(data) / 2**20:7.2f} MiB  {elapsed:8.3f} s  {mib_s:9.2f} MiB/s")
    return mib_s


def drain(data: bytes) -> None:
    """The baseline: what the core does with a pty's bytes."""
    buffer = bytearray()
    for start in range(0, len(data), CHUNK):
        buffer += data[start : start + CHUNK]


def stock(screen_type: type[pyte.Screen], columns: int, lines: int) -> Callable[[bytes], None]:
    """Feed through stock pyte, in pty-sized chunks."""

    def run(data: bytes) -> None:
        stream = pyte.ByteStream(screen_type(columns, lines))
        for start in range(0, len(data), CHUNK):
            stream.feed(data[start : start + CHUNK])

    return run


def term_screen(columns: int, lines: int, capped: bool) -> Callable[[bytes], None]:
    """Feed through TermScreen in pty-sized chunks, then emulate the backlog."""

    def run(data: bytes) -> None:
        screen = TermScreen(columns, lines) if capped else TermScreen(columns, lines, max_pending=1 << 40)
        for start in range(0, len(data), CHUNK):
            screen.feed(data[start : start + CHUNK])
        while screen.pending:
            screen.process(64 * 1024)

    return run


def term_skip(columns: int, lines: int) -> Callable[[bytes], None]:
    """Feed in pty-sized chunks; every 16 of them (a repaint's worth), skip ahead and emulate."""

    def run(data: bytes) -> None:
        screen = TermScreen(columns, lines)
        for number, start in enumerate(range(0, len(data), CHUNK)):
            screen.feed(data[start : start + CHUNK])
            if number % 16 == 15:
                screen.skip_ahead()
                screen.process()
        screen.skip_ahead()
        while screen.pending:
            screen.process(64 * 1024)

    return run


def render_cost(data: bytes, columns: int, lines: int, repeats: int = 200) -> float:
    """Microseconds to get the runs of every row of a full screen."""
    screen = TermScreen(columns, lines)
    screen.feed(data[-256 * 1024 :])
    while screen.pending:
        screen.process()
    started = time.perf_counter()
    for _ in range(repeats):
        for y in range(lines):
            screen.line_runs(y)
    return (time.perf_counter() - started) / repeats * 1e6


def main() -> None:
    """Run every variant and print rates and ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=float, default=8, help="log size for raw and TermScreen")
    parser.add_argument("--sample-mib", type=float, default=1, help="log size for stock pyte")
    parser.add_argument("--columns", type=int, default=120)
    parser.add_argument("--lines", type=int, default=40)
    args = parser.parse_args()
    data = make_log(int(args.mib * 2**20))
    sample = data[: int(args.sample_mib * 2**20)]
    columns, lines = args.columns, args.lines
    print(f"log {len(data) / 2**20:.1f} MiB, sample {len(sample) / 2**20:.1f} MiB, {columns}x{lines}")
    raw = rate("raw drain", data, drain)
    screen = rate("pyte Screen", sample, stock(pyte.Screen, columns, lines))
    history = rate("pyte HistoryScreen", sample, stock(pyte.HistoryScreen, columns, lines))
    full = rate("TermScreen", data, term_screen(columns, lines, capped=False))
    flood = rate("TermScreen flood", data, term_screen(columns, lines, capped=True))
    skip = rate("TermScreen skip", data, term_skip(columns, lines))
    print()
    rows = [("pyte HistoryScreen", history), ("TermScreen", full), ("TermScreen flood", flood)]
    for label, value in [*rows, ("TermScreen skip", skip)]:
        print(f"{label:<22} vs raw 1/{raw / value:,.0f}   vs pyte Screen x{value / screen:.1f}")
    print(f"{'render':<22} {render_cost(data, columns, lines):9.0f} us per full screen of runs")


if __name__ == "__main__":
    main()
