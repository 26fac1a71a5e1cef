"""One terminal renderer? Batch mode's regexes (`core.model.text.terminal_lines`) against the panes'
pyte emulator (`term.screen.TermScreen`) on the same rank output.

The output is what ranks print under ddptui (`--lines`, 10k by default): pdb's location lines and
prompts, tracebacks, `\\r` progress bars that end with a newline, ANSI colours, log lines, some
UTF-8, every line ended with CR LF as a pty ends it. Both read it in 4 KiB chunks cut at line ends
(as batch prints whole lines). For the emulator, every line is kept: a screen as wide as the widest
line (pyte wraps at the edge, a transcript does not) with scrollback for all of them, and the text
read back from its history and screen; stock pyte (`HistoryScreen`) is timed beside it.

It prints each one's time and rate, `vs regex` (how many times slower than the regexes), and whether
the emulator gives the same lines, with the first that differ.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import pyte

from ddptui.core.model.text import terminal_lines
from ddptui.term.screen import TermScreen

CHUNK = 4096
"""Bytes per read, cut back to a line's end."""


def rank_output(count: int) -> bytes:
    """`count` lines (or a few more) of what a rank prints under ddptui."""
    lines: list[bytes] = []
    step = 0
    while len(lines) < count:
        lines += [
            b"> /home/user/train.py(%d)<module>()" % (40 + step % 9),
            b"-> loss = model(batch).sum()",
            b"(Pdb) p loss",
            b"tensor(%d.5000, grad_fn=<SumBackward0>)" % step,
            b"\x1b[32mINFO\x1b[0m \x1b[1mtrainer\x1b[0m: epoch %d step %d loss=%.4f \xe2\x9c\x93"
            % (step // 10, step, 1 / (step + 1)),
            b"".join(
                b"\r%3d%%|%-20s| %d/20 [00:0%d<00:00, 9.5it/s]" % (i * 5, b"\xe2\x96\x88" * i, i, i % 10)
                for i in range(0, 21, 4)
            ),
            b"\x1b[33mwarning\x1b[0m: \x1b[2mtorch/nn/modules/module.py:1520\x1b[0m: "
            b"UserWarning: \xc3\xa9t\xc3\xa9",
        ]
        if step % 5 == 4:
            lines += [
                b"Traceback (most recent call last):",
                b'  File "/home/user/train.py", line 52, in <module>',
                b"    step(model, batch)",
                b'  File "/home/user/train.py", line 31, in step',
                b"    raise ValueError(f'bad batch {i}')",
                b"\x1b[31mValueError\x1b[0m: bad batch %d" % step,
            ]
        step += 1
    return b"".join(line + b"\r\n" for line in lines)


def chunks(data: bytes) -> list[bytes]:
    """`data` in reads of about CHUNK bytes, each ending at a line's end."""
    parts, start = [], 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + CHUNK) + 1 or data.find(b"\n", start) + 1 or len(data)
        parts.append(data[start:end])
        start = end
    return parts


def by_regex(parts: list[bytes]) -> list[str]:
    """Batch mode's way: each read's lines through the regexes."""
    return [line for part in parts for line in terminal_lines(part)]


def by_emulator(parts: list[bytes], columns: int, count: int) -> list[str]:
    """The panes' way: a TermScreen wide enough never to wrap, its scrollback holding every line."""
    screen = TermScreen(columns, 24, history=count + 24, max_pending=1 << 40)
    for part in parts:
        screen.feed(part)
        while screen.pending:
            screen.process()
    return screen.tail_text(count + 24).split("\n")


def by_stock_pyte(parts: list[bytes], columns: int, count: int) -> list[str]:
    """Stock pyte's HistoryScreen, for scale."""
    screen = pyte.HistoryScreen(columns, 24, history=count + 24)
    stream = pyte.ByteStream(screen)
    for part in parts:
        stream.feed(part)
    return []


def timed(label: str, size: int, run: Callable[[], list[str]], base: float | None) -> tuple[float, list[str]]:
    """Run `run` (best of three), print its time, rate and ratio to `base`; its seconds and lines."""
    best, lines = float("inf"), []
    for _ in range(3):
        started = time.perf_counter()
        lines = run()
        best = min(best, time.perf_counter() - started)
    ratio = f"{best / base:6.1f}x" if base else "     -"
    print(f"{label:<24} {best * 1000:8.1f} ms  {size / best / 2**20:7.2f} MiB/s  vs regex {ratio}")
    return best, lines


def main() -> None:
    """Time both renderers on the same output and compare what they give."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000, help="lines of rank output")
    args = parser.parse_args()
    data = rank_output(args.lines)
    parts = chunks(data)
    expected = by_regex(parts)
    count = len(expected)
    columns = max(len(line) for line in expected) + 1
    print(f"{count} lines, {len(data) / 2**20:.2f} MiB in {len(parts)} reads, emulated {columns} columns")
    base, regex = timed("regex (batch)", len(data), lambda: by_regex(parts), None)
    _, emulated = timed("TermScreen (panes)", len(data), lambda: by_emulator(parts, columns, count), base)
    timed("pyte HistoryScreen", len(data), lambda: by_stock_pyte(parts, columns, count), base)
    emulated = emulated[len(emulated) - count :] if len(emulated) >= count else emulated
    differ = [(i, a, b) for i, (a, b) in enumerate(zip(regex, emulated, strict=False)) if a != b]
    same = not differ and len(regex) == len(emulated)
    print(f"same text: {'yes' if same else 'no'} ({len(differ)} of {count} lines differ)")
    for index, mine, theirs in differ[:3]:
        print(f"  line {index}: regex {mine!r}\n  {' ' * len(str(index))}  pyte  {theirs!r}")


if __name__ == "__main__":
    main()
