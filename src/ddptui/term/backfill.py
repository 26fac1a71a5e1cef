"""`Backfill`: a rank's recent output emulated again in full, beside the live screen, after a flood.

During a flood a pane skips what cannot change its final screen (`TermScreen.skip_ahead`), so its
scrollback holds blocks of lines between `[ddptui: ... skipped]` markers. The core kept every
byte: once the flood is over, the pane emulates them again on a screen of its own, a little each
frame, and takes that screen's scrollback when it shows exactly the live screen. If it does not
(a resize, output that the window's start cannot reproduce), the markers stay: nothing is lost.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from ddptui.term.screen import TermScreen

WINDOW = 8 * 1024 * 1024
"""Most bytes emulated again: the core keeps at most this much of a rank's output."""
STEP = 512
"""Bytes emulated between two looks at the clock (under a millisecond on a slow core)."""


class Output(Protocol):
    """A rank's output as the core keeps it (`ddptui.core.model.output.OutputLog`)."""

    @property
    def start(self) -> int:
        """The offset of the oldest byte kept."""

    @property
    def end(self) -> int:
        """The offset just past the last byte."""

    def since(self, offset: int) -> bytes:
        """The bytes from `offset` on."""


def window(output: Output, rows: int) -> tuple[int, memoryview]:
    """Where to start so that at least `rows` lines end up on screen and in the scrollback (after
    the newline `rows` newlines back from the end, at most WINDOW bytes back, at a line's start),
    and the bytes from there on (read once: they can be megabytes)."""
    start = max(output.start, output.end - WINDOW)
    data = output.since(start)
    cut = len(data)
    for _ in range(rows + 1):
        cut = data.rfind(b"\n", 0, cut)
        if cut < 0:
            break
    if cut >= 0:
        cut += 1
    elif start > 0:  # older bytes were dropped (or are out of the window): start at a line
        cut = data.find(b"\n") + 1 or len(data)
    else:
        cut = 0
    return start + cut, memoryview(data)[cut:]


class Backfill:
    """Emulates `output` from `window_start` on a screen of its own, `step` by `step`."""

    def __init__(self, output: Output, columns: int, lines: int, history: int) -> None:
        self._output = output
        self.screen = TermScreen(columns, lines, history, max_pending=2 * WINDOW, keep=2 * WINDOW)
        start, data = window(output, history + lines)
        self.screen.feed(data)
        self._offset = start + len(data)
        self.failed = False
        """True once the window cannot be caught up (the core dropped bytes not yet emulated)."""

    def step(self, deadline: float, clock: Callable[[], float]) -> bool:
        """Emulate until `clock()` passes `deadline`; True once caught up with the output."""
        output, screen = self._output, self.screen
        if self._offset < output.start:
            self.failed = True
            return False
        if self._offset < output.end:
            screen.feed(output.since(self._offset))
            self._offset = output.end
        while screen.pending and clock() < deadline:
            screen.process(STEP)
        return not screen.pending
