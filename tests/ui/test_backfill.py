"""A flood's scrollback comes back: once a pane that skipped a flood is at rest, it emulates the
core's copy of the output again and ends with the scrollback of full emulation, not markers."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.app import App, ComposeResult

import ddptui.ui
from ddptui.core.model.output import OutputLog
from ddptui.term.backfill import Backfill, window
from ddptui.term.screen import TermScreen
from ddptui.ui.pane_turns import TURNS
from ddptui.ui.rank_pane import RankPane

HISTORY = 3000


def flood(count: int) -> bytes:
    """Numbered log lines with colours and `\\r` progress bars, as a pty in cooked mode sends them."""
    lines = []
    for step in range(count):
        if step % 5 == 0:
            lines.append(b"\r 10%|##   |\r 50%|#####|\r100%|#########|")
        colour = b"\x1b[32m" if step % 3 == 0 else b""
        lines.append(b"%sstep %d loss %.4f\x1b[0m tail of the line\r\n" % (colour, step, 1 / (step + 1)))
    return b"".join(lines)


def full(data: bytes, columns: int, lines: int) -> TermScreen:
    """The terminal fed every byte, nothing skipped."""
    screen = TermScreen(columns, lines, HISTORY, max_pending=1 << 30, keep=1 << 30)
    screen.feed(data)
    while screen.pending:
        screen.process()
    return screen


class PaneApp(App[None]):
    """One rank pane, as the app shows it."""

    CSS_PATH = Path(ddptui.ui.__file__).parent / "rank_pane.tcss"

    def compose(self) -> ComposeResult:
        yield RankPane(0, history=HISTORY, id="pane")


async def test_a_skipped_flood_gets_its_scrollback_back_at_rest() -> None:
    data = flood(20_000)
    app = PaneApp()
    async with app.run_test(size=(90, 30)) as pilot:
        pane = app.query_one(RankPane)
        await pilot.pause()
        output = OutputLog()
        pane.source = output  # what the app gives each pane: the core's copy of the rank's output
        for start in range(0, len(data), 64 * 1024):  # faster than the pane emulates: it skips
            chunk = data[start : start + 64 * 1024]
            output.append(chunk)
            pane.feed(chunk)
        assert pane.terminal.skipped_bytes > 0
        deadline = time.monotonic() + 60
        while pane.terminal.pending or "[ddptui:" in pane.terminal.tail_text(HISTORY):
            assert time.monotonic() < deadline, "the scrollback never came back"
            await pilot.pause(0.02)
        columns, lines = pane.size
        reference = full(data, columns, lines)
        assert pane.terminal.tail_text(HISTORY + lines) == reference.tail_text(HISTORY + lines)
        assert pane.terminal.same_screen(reference)
        assert "step 19999 " in pane.terminal.text()
        assert pane.terminal.total_lines == reference.total_lines


def test_the_window_starts_at_a_line_far_enough_back() -> None:
    output = OutputLog(cap=4096)
    output.append(b"".join(b"line %d\n" % i for i in range(2000)))  # keeps the tail, cut mid-line
    assert output.start > 0
    start, data = window(output, 10)
    assert bytes(data) == output.since(start)
    assert output.since(start).count(b"\n") == 10 and output.since(start - 1)[:1] == b"\n"
    start, data = window(output, 10_000)  # more than kept: the first whole line kept
    first = output.since(output.start)
    assert start == output.start + first.find(b"\n") + 1 and bytes(data) == output.since(start)


class TwoPanes(App[None]):
    """Two rank panes side by side."""

    CSS_PATH = Path(ddptui.ui.__file__).parent / "rank_pane.tcss"

    def compose(self) -> ComposeResult:
        yield RankPane(0, history=HISTORY, id="pane-0")
        yield RankPane(1, history=HISTORY, id="pane-1")


async def test_panes_take_turns_at_backfill_and_leave_it_while_keys_come(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Backfill steps of all panes are at least `BACKFILL_SLOT` apart (each pane's frame taking its
    budget back to back stalled the loop), and none runs within `KEY_QUIET` of a key."""
    steps: list[tuple[float, Backfill]] = []  # the objects kept, so no id is reused after a GC
    step = Backfill.step

    def timed(backfill: Backfill, deadline: float, clock: Callable[[], float]) -> bool:
        steps.append((time.monotonic(), backfill))
        return step(backfill, deadline, clock)

    monkeypatch.setattr(Backfill, "step", timed)
    data = flood(8_000)
    app = TwoPanes()
    async with app.run_test(size=(160, 30)) as pilot:
        panes = list(app.query(RankPane))
        await pilot.pause()
        for pane in panes:
            output = OutputLog()
            pane.source = output
            for start in range(0, len(data), 64 * 1024):
                output.append(data[start : start + 64 * 1024])
                pane.feed(data[start : start + 64 * 1024])
        deadline = time.monotonic() + 60
        while not steps:
            assert time.monotonic() < deadline, "no backfill began"
            await pilot.pause(0.01)
        TURNS.key_pressed()
        typed = time.monotonic()
        while any(p.terminal.pending or "[ddptui:" in p.terminal.tail_text(HISTORY) for p in panes):
            assert time.monotonic() < deadline, "the scrollback never came back"
            await pilot.pause(0.02)
    times = [when for when, _ in steps]
    assert len({id(backfill) for _, backfill in steps}) == 2
    assert min(b - a for a, b in itertools.pairwise(times)) >= TURNS.BACKFILL_SLOT * 0.95
    assert not [when for when in times if typed < when < typed + TURNS.KEY_QUIET]
