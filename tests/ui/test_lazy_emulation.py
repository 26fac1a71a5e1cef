"""Lazy emulation equals full emulation: skipping ahead and budgeted frames end on the same screen.

A pane emulates a flood on its own schedule: bytes arrive in pty-sized chunks, frames emulate a
budget of them, a pane off screen only queues them, and `TermScreen.skip_ahead` drops what cannot
change the final screen. Whatever the order of those, the screen it ends on (text, attributes,
cursor, modes) must be the one a terminal fed every byte at once shows. The output is generated
deterministically from a seed: log lines, colours (some spanning lines), `\\r` progress bars,
long wrapping lines, tabs, wide and combining characters, in-line erases, and now and then
output that moves the cursor up, sets a scroll region, switches to the alternate screen or
changes modes.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import ddptui.ui
from ddptui.term.emulator import LINE_LOCAL, line_local_end
from ddptui.term.screen import Cursor, Run, TermScreen
from ddptui.ui.rank_pane import RankPane

CHUNKS = (1, 5, 64, 700, 4095, 4095, 4095, 3 * 4095, 65536)
"""Sizes of the simulated pty reads (a loaded core reads several 4095-byte chunks at once)."""


def log_line(rng: random.Random, step: int) -> bytes:
    """One line of what training ranks print (CR LF, as a pty in cooked mode turns LF into)."""
    kind = rng.randrange(12)
    if kind < 4:
        return b"[rank0] step %d loss=%.4f lr=0.001 grad_norm=%.3f\r\n" % (step, 1 / (step + 1), step % 7)
    if kind < 6:
        return b"\x1b[32mINFO\x1b[0m \x1b[1mtrainer\x1b[0m: epoch %d batch %d done \xe2\x9c\x93\r\n" % (
            step // 100,
            step,
        )
    if kind == 6:  # a progress bar redrawn in place, sometimes left unfinished on its line
        bar = b"".join(
            b"\r%3d%%|%-20s| %d/100" % (p, b"#" * (p // 5), p) for p in range(0, 101, rng.choice((7, 25, 50)))
        )
        return bar + (b"\r\n" if rng.random() < 0.7 else b"")
    if kind == 7:  # colours left on across lines, 256 and true colour, reset later
        colour = rng.choice(
            (b"\x1b[33m", b"\x1b[1;35m", b"\x1b[38;5;%dm" % rng.randrange(256), b"\x1b[48;2;10;20;30m")
        )
        return (
            colour
            + b"WARNING %d: still going\r\nand on\r\n" % step
            + rng.choice((b"", b"\x1b[0m", b"\x1b[m"))
        )
    if kind == 8:  # longer than a line: wraps
        return b"%d:" % step + b"abcdefghij" * rng.randrange(3, 30) + b"\r\n"
    if kind == 9:
        return rng.choice(
            (
                b"col1\tcol2\tcol3\r\n",
                "日本語のログ行 %d\r\n".encode() % step,
                "cafe\u0301 na\u0308ive\r\n".encode(),
                b"\x1b[2K\rerased and redrawn %d\r\n" % step,
                b"tail to be erased\x1b[5D\x1b[K!\r\n",
                b"\r\n",
                b"raw line feed only\n",
            )
        )
    if kind == 10:
        return b"%08d " % step + bytes(rng.randrange(32, 127) for _ in range(rng.randrange(0, 60))) + b"\r\n"
    return b"\x1b[0;36mdebug\x1b[39m rank 0 iteration %d\x1b[0m\r\n" % step


def screen_control(rng: random.Random) -> bytes:
    """Output that is not line-local: cursor moves up, scroll regions, alternate screen, modes."""
    return rng.choice(
        (
            b"\x1b[2A\x1b[10Cup two\x1b[2B\r\n",  # tqdm's multi-bar redraw
            b"\x1b[3Aup three\r\n",
            b"\x1b[1;1Hhome\r\n",
            b"\x1b[5;1Hrow five\x1b[J\r\n",
            b"\x1b[H\x1b[2Jcleared\r\n",
            b"\x1b[3;6rregion\r\n\r\n\r\n\r\n\r\n\r\n\r\n\x1b[r",
            b"\x1b[?1049halternate\r\n\x1b[5;5Hin the middle\x1b[?1049l",
            b"\x1b[?25l\x1b[?1h\x1b[?2004h",
            b"\x1b[?25h\x1b[?1l\x1b[?2004l",
            b"\x1b]0;a title\x07",
            b"\x1b7saved\x1b8\x1bM",  # save/restore cursor, reverse index
            b"\xc2\x9b31mC1 CSI\xc2\x9b0m\r\n",
            b"\x1b[L\x1b[M\x1b[S\x1b[T",
        )
    )


def realistic_output(seed: int, size: int, controls: float = 0.002) -> bytes:
    """About `size` bytes of rank output; a fraction `controls` of the items is not line-local."""
    rng = random.Random(seed)
    parts, total, step = [], 0, 0
    while total < size:
        part = screen_control(rng) if rng.random() < controls else log_line(rng, step)
        parts.append(part)
        total += len(part)
        step += 1
    return b"".join(parts)


def full(data: bytes, columns: int, lines: int) -> TermScreen:
    """The reference: every byte emulated, in one go."""
    screen = TermScreen(columns, lines, max_pending=1 << 40)
    screen.feed(data)
    while screen.pending:
        screen.process(len(data))
    return screen


def shown(screen: TermScreen) -> tuple[list[list[Run]], Cursor, tuple[bool, bool], str]:
    """Everything the live screen shows or reports: runs of every row, cursor, modes, title."""
    assert screen.scroll_offset == 0
    return (
        [screen.line_runs(y) for y in range(screen.lines)],
        screen.cursor,
        (screen.app_cursor, screen.bracketed_paste),
        screen.title,
    )


def lazily(data: bytes, columns: int, lines: int, seed: int) -> TermScreen:
    """Fed in random chunks; random frames skip ahead and emulate a random budget, or wait."""
    rng = random.Random(seed)
    screen = TermScreen(columns, lines)
    offset = 0
    while offset < len(data):
        size = rng.choice(CHUNKS)
        screen.feed(data[offset : offset + size])
        offset += size
        roll = rng.random()
        if roll < 0.3:
            screen.skip_ahead(rng.choice((0, 0, 4096)))
        if roll < 0.6:
            screen.process(rng.choice((1, 100, 2048, 16384)))
    screen.skip_ahead()
    while screen.pending:
        screen.process(2048)
    return screen


SIZES = [(80, 24), (48, 11), (23, 3), (132, 40), (40, 1)]


@pytest.mark.parametrize(("columns", "lines"), SIZES)
def test_skipping_ahead_through_a_log_flood_ends_on_the_full_screen(columns: int, lines: int) -> None:
    data = realistic_output(seed=columns * lines, size=200_000, controls=0)
    lazy = lazily(data, columns, lines, seed=lines)
    assert shown(lazy) == shown(full(data, columns, lines))
    assert lazy.skipped_bytes > len(data) // 2  # most of it was never emulated...
    assert "[ddptui:" in lazy.tail_text(10_000)  # ...and the scrollback says so


@pytest.mark.parametrize("seed", range(6))
def test_output_that_moves_the_cursor_still_ends_on_the_full_screen(seed: int) -> None:
    columns, lines = SIZES[seed % len(SIZES)]
    data = realistic_output(seed, size=80_000, controls=0.01)
    lazy = lazily(data, columns, lines, seed)
    assert shown(lazy) == shown(full(data, columns, lines))
    assert lazy.skipped_bytes > 0


CONTROLS = [screen_control(random.Random(seed)) for seed in range(200)]


@pytest.mark.parametrize("control", sorted(set(CONTROLS)))
def test_output_that_is_not_line_local_is_never_skipped_over(control: bytes) -> None:
    rng = random.Random(control)
    flood = b"".join(log_line(rng, step) for step in range(300))
    columns, lines = 30, 6
    for after in range(lines + 2):  # the control a few lines before the end, where a cut would go
        data = flood + control + b"".join(log_line(rng, step) for step in range(after))
        screen = TermScreen(columns, lines)
        screen.feed(data)
        screen.skip_ahead()
        while screen.pending:
            screen.process(100)
        assert shown(screen) == shown(full(data, columns, lines)), after
        assert screen.skipped_bytes > 0


@pytest.mark.parametrize("seed", range(4))
def test_every_chunking_of_a_short_burst_ends_on_the_full_screen(seed: int) -> None:
    rng = random.Random(seed)
    data = realistic_output(seed, size=6_000, controls=0.05)
    columns, lines = rng.choice(SIZES)
    reference = shown(full(data, columns, lines))
    for attempt in range(20):
        assert shown(lazily(data, columns, lines, seed=1000 * seed + attempt)) == reference


def test_a_full_pending_cap_skips_exactly_while_the_output_allows() -> None:
    data = realistic_output(seed=7, size=600_000, controls=0.0005)
    screen = TermScreen(100, 30)  # never processed until the end: a pane off screen
    for start in range(0, len(data), 4095):
        screen.feed(data[start : start + 4095])
    assert screen.pending <= 256 * 1024
    assert screen.skipped_bytes > 250_000
    while screen.pending:
        screen.process()
    assert shown(screen) == shown(full(data, 100, 30))


class PaneApp(App[None]):
    """One rank pane, as the app shows it."""

    CSS_PATH = Path(ddptui.ui.__file__).parent / "rank_pane.tcss"

    def compose(self) -> ComposeResult:
        yield RankPane(0, id="pane")


@pytest.mark.asyncio
@pytest.mark.parametrize("seed", range(2))
async def test_a_flooded_pane_ends_on_the_full_screen_whether_shown_or_hidden(seed: int) -> None:
    data = realistic_output(seed, size=800_000, controls=0.0005)
    rng = random.Random(seed)
    app = PaneApp()
    async with app.run_test(size=(90, 30)) as pilot:
        pane = app.query_one(RankPane)
        await pilot.pause()
        columns, lines = pane.size
        offset, deadline = 0, time.monotonic() + 60
        while offset < len(data):
            if rng.random() < 0.05:
                pane.display = not pane.display  # another page of panes shown for a while
            for _ in range(rng.randrange(1, 8)):  # a wake-up's worth of pty reads
                size = rng.choice(CHUNKS)
                pane.feed(data[offset : offset + size])
                offset += size
            await pilot.pause()  # the loop runs: frames, screen updates
        pane.display = True
        while pane.terminal.pending or pane.terminal.dirty:
            assert time.monotonic() < deadline, "the pane never caught up"
            await pilot.pause()
        await pilot.pause()
        reference = full(data, columns, lines)
        assert shown(pane.terminal) == shown(reference)
        drawn = [pane.render_line(y).text.rstrip() for y in range(lines)]
        assert drawn == reference.text().split("\n") + [""] * (lines - len(reference.text().split("\n")))
        assert pane.terminal.skipped_bytes > len(data) // 2


@pytest.mark.parametrize("seed", range(3))
def test_the_quick_line_local_check_agrees_with_the_pattern(seed: int) -> None:
    rng = random.Random(seed)
    pieces = [
        b"text ",
        b"\x1b[31m",
        b"\x1b[2K",
        b"\x1b[",
        b"3",
        b"A",
        b"m",
        b"\xc2",
        b"\xa0",
        b"\x9b",
        b"\r\n",
    ]
    pieces += [b"\x07", b"\x00", b"\x7f", b"\x1b]0;t\x07", "é✓".encode()]
    for _ in range(300):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 30)))
        prefix = LINE_LOCAL.match(data)
        assert prefix is not None
        start = prefix.end() if rng.random() < 0.5 else 0
        expected = LINE_LOCAL.match(data, start)
        assert expected is not None
        assert line_local_end(data, start) == expected.end(), data
