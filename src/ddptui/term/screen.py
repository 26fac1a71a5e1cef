"""One rank's terminal: raw bytes in, lines of attribute runs out, emulated lazily with pyte.

The core drains every pty at full speed and hands the bytes to `TermScreen.feed`, which only
appends them to a buffer. The UI calls `TermScreen.process` with a budget on its own schedule, so
a slow emulator can never slow a rank down (that would change the timing of its collectives).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from ddptui.term.emulator import (
    BRACKETED_PASTE,
    DECCKM,
    SGR,
    GuardedStream,
    ScrollbackScreen,
    line_local_end,
)
from ddptui.term.runs import DEFAULT_ATTR, Attr, Cells, Line, Run, cells_to_runs, snapshot

__all__ = ["DEFAULT_ATTR", "Attr", "Cursor", "Line", "Run", "TermScreen"]


class Cursor(NamedTuple):
    """Where the cursor is on the live screen (not the scrolled view)."""

    x: int
    y: int
    hidden: bool


def _text(line: Iterable[Run]) -> str:
    """The characters of a line, without trailing blanks."""
    return "".join(text for text, _ in line).rstrip()


def _size(count: int) -> str:
    """A byte count for people."""
    return f"{count / 1048576:.1f} MiB" if count >= 1048576 else f"{count / 1024:.0f} KiB"


def _cells_text(cells: Cells) -> str:
    """The characters of a line of cells, without trailing blanks."""
    return _text(cells_to_runs(cells))


class TermScreen:
    """The emulated terminal of one rank: a pending byte buffer, a pyte screen and a scrollback.

    `feed` only appends bytes; `process` runs pyte on at most `budget` of them. `skip_ahead`
    drops what cannot change the final screen: of a log flood (text, colours, `\r` progress bars,
    in-line erases) only the last screenful of lines needs emulating, and the screen, cursor and
    colours then end exactly as if every byte had been (the scrollback gets a "skipped" marker
    line instead of the lines in between). When more than `max_pending` bytes wait (the rank
    writes faster than we emulate), they are skipped ahead; if the output cannot be skipped
    exactly (cursor moves up, scroll regions, modes), the oldest are dropped and only the last
    `keep` bytes, cut at a newline, are replayed after the marker: then a sequence split by the
    cut may look wrong until the next full redraw. The core keeps every byte either way.
    """

    CAP_WORK = 4096
    """Bytes `feed` may emulate, once over `max_pending`, to skip more exactly (4 ms or so)."""

    def __init__(
        self,
        columns: int,
        lines: int,
        history: int = 5000,
        *,
        max_pending: int = 256 * 1024,
        keep: int = 32 * 1024,
    ) -> None:
        """A `columns` x `lines` terminal keeping `history` lines of scrollback.

        Args:
            columns: Width in cells.
            lines: Height in lines.
            history: Lines kept after they scroll off the top.
            max_pending: Unemulated bytes that trigger dropping the oldest ones.
            keep: Bytes kept (and replayed) when that happens.
        """
        self._screen = ScrollbackScreen(max(columns, 1), max(lines, 1), history)
        self._stream = GuardedStream(self._screen)
        self._pending = bytearray()
        self._line_local = 0
        """How many leading pending bytes are known to be `LINE_LOCAL` (a cache for skip_ahead)."""
        self._max_pending, self._keep = max_pending, min(keep, max_pending)
        self._skipped = 0
        self._scroll = 0
        self._last_cursor = self.cursor
        self.skipped_bytes = 0
        """Bytes dropped unemulated so far, over the life of the screen."""
        self.dirty: set[int] = set(range(lines))
        """View rows to redraw; the renderer clears it."""

    @property
    def columns(self) -> int:
        """The width of the screen in cells."""
        return self._screen.columns

    @property
    def lines(self) -> int:
        """The height of the screen (and of the view) in lines."""
        return self._screen.lines

    @property
    def pending(self) -> int:
        """How many fed bytes wait to be emulated."""
        return len(self._pending)

    @property
    def cursor(self) -> Cursor:
        """The cursor on the live screen; `x` is kept inside the last column."""
        cursor = self._screen.cursor
        return Cursor(min(cursor.x, self.columns - 1), cursor.y, cursor.hidden)

    @property
    def app_cursor(self) -> bool:
        """Whether the rank asked for application cursor keys (DECCKM, `CSI ? 1 h`)."""
        return DECCKM in self._screen.mode

    @property
    def bracketed_paste(self) -> bool:
        """Whether the rank asked for bracketed paste (`CSI ? 2004 h`)."""
        return BRACKETED_PASTE in self._screen.mode

    @property
    def title(self) -> str:
        """The window title the rank set with OSC 0 or 2."""
        return self._screen.title

    @property
    def scroll_offset(self) -> int:
        """How many lines the view is scrolled back from the live screen (0 = at the bottom)."""
        return self._scroll

    @property
    def total_lines(self) -> int:
        """Scrollback plus screen lines."""
        return len(self._screen.history) + self.lines

    def feed(self, data: bytes | memoryview) -> None:
        """Queue bytes from the rank's pty; no emulation happens here."""
        self._pending += data
        if len(self._pending) > self._max_pending:
            self.skip_ahead(self.CAP_WORK)
            if len(self._pending) > self._max_pending:
                self._drop_oldest()

    def process(self, budget: int = 256 * 1024) -> bool:
        """Emulate at most `budget` pending bytes (ending at a line's end if one is in the second
        half, so that the parser rests there); True when the view changed."""
        if self._skipped:
            self._mark_skipped()
        pending = self._pending
        if pending:
            if len(pending) > budget:
                newline = pending.rfind(b"\n", budget // 2, budget)
                budget = newline + 1 if newline >= 0 else budget
            chunk = pending[:budget]
            del pending[:budget]
            self._line_local = max(self._line_local - len(chunk), 0)
            self._stream.feed(chunk)
        return self._collect_changes()

    def skip_ahead(self, work: int = 0) -> int:
        """Drop the pending bytes that cannot change what the screen ends up showing; how many.

        Those are the leading ones up to where output that is not line-local starts (see
        `_skip_once`). With `work`, up to that many bytes are emulated to get past such output
        (a cursor move up, a mode change) so that more of what follows can be skipped.
        """
        skipped = self._skip_once()
        pending = self._pending
        while work > 0 and len(pending) > self._keep:
            stop = self._line_local  # where output that is not line-local starts (or the end)
            if stop >= len(pending):
                break
            step = min(stop + 256, work)
            chunk = pending[:step]
            del pending[:step]
            self._line_local = 0
            self._stream.feed(chunk)
            work -= step
            skipped += self._skip_once()
        return skipped

    def _skip_once(self) -> int:
        """Skip the leading pending bytes that cannot change the final screen; how many.

        They are the leading ones, up to a CR LF after which `lines - 1` line feeds still come,
        all `LINE_LOCAL` (text, colours, `\r`, in-line erases; no cursor moves up, modes or scroll
        regions), with the parser at rest before them and enough line feeds among them to leave
        the cursor on the bottom line. Whatever they drew is then scrolled off by the line feeds
        after them, so only their colours matter: their SGR sequences (from the last reset) are
        replayed. The screen, cursor, colours and modes end exactly as with full emulation; the
        scrollback gets the lines the skipped part pushed off the screen, then a marker line.
        """
        screen, pending, lines = self._screen, self._pending, self.lines
        if len(pending) < 2 * lines or not self._stream.at_rest() or not screen.scrolls_whole_screen():
            return 0
        if self._line_local < len(pending):
            self._line_local = line_local_end(pending, self._line_local)
        cut = self._cut(self._line_local)
        feeds = self._feeds(cut, lines)
        if not feeds or screen.cursor.y + feeds < lines:  # the last line feed would not scroll
            return 0
        colours = b"".join(match[0] for match in SGR.finditer(pending, self._last_reset(cut), cut))
        screen.stand_in(screen.cursor.y + feeds - (lines - 1), f"[ddptui: {_size(cut)} of output skipped]")
        if colours:
            self._stream.feed(colours)
        del pending[:cut]
        self._line_local -= cut
        self.skipped_bytes += cut
        return cut

    def resize(self, columns: int, lines: int) -> None:
        """Change the screen size (lines above the cursor go to the scrollback when shrinking)."""
        columns, lines = max(columns, 1), max(lines, 1)
        self._screen.resize(lines=lines, columns=columns)
        self._collect_changes()
        self.dirty.update(range(lines))

    def scroll(self, delta: int) -> bool:
        """Move the view `delta` lines back into the scrollback (negative: forward); True if moved."""
        offset = max(0, min(self._scroll + delta, len(self._screen.history)))
        if offset == self._scroll:
            return False
        self._scroll = offset
        self.dirty.update(range(self.lines))
        return True

    def scroll_to_bottom(self) -> bool:
        """Show the live screen again; True if the view moved."""
        return self.scroll(-self._scroll)

    def line_runs(self, y: int) -> list[Run]:
        """Runs of equal attributes for row `y` of the view (scrollback and screen)."""
        history = self._screen.history
        index = len(history) - self._scroll + y
        if index < 0 or y >= self.lines:
            return []
        if index < len(history):
            cells = history[index][: self.columns]
        else:
            cells = snapshot(self._screen.buffer.get(index - len(history)), self.columns)
        return list(cells_to_runs(cells))

    def same_screen(self, other: TermScreen) -> bool:
        """True when `other` shows exactly this live screen: every cell, the cursor, the modes, the title."""
        mine, theirs = self._screen, other._screen
        return (self.columns, self.lines, self.cursor, mine.mode, mine.title) == (
            other.columns,
            other.lines,
            other.cursor,
            theirs.mode,
            theirs.title,
        ) and all(
            list(cells_to_runs(snapshot(mine.buffer.get(y), self.columns)))
            == list(cells_to_runs(snapshot(theirs.buffer.get(y), self.columns)))
            for y in range(self.lines)
        )

    def text(self) -> str:
        """The view as plain text: lines without trailing blanks, trailing empty lines dropped."""
        return "\n".join(_text(self.line_runs(y)) for y in range(self.lines)).rstrip("\n")

    def tail_text(self, count: int) -> str:
        """The last `count` lines of scrollback and screen, ignoring blank lines at the bottom."""
        screen = self._screen
        rows = [_cells_text(snapshot(screen.buffer.get(y), self.columns)) for y in range(self.lines)]
        while rows and not rows[-1]:
            rows.pop()
        start = max(len(screen.history) - max(count - len(rows), 0), 0)
        older = [_cells_text(screen.history[i]) for i in range(start, len(screen.history))]
        return "\n".join((older + rows)[-count:]) if count > 0 else ""

    def _cut(self, end: int) -> int:
        """Just after a CR LF followed by `lines - 1` line feeds before `end`, as late as can be; or 0."""
        pending, newline = self._pending, end
        for _ in range(self.lines):
            newline = pending.rfind(b"\n", 0, newline)
            if newline < 0:
                return 0
        for _ in range(64):  # output without CR (a raw tty) is not worth a longer search
            if newline > 0 and pending[newline - 1] == 0x0D:
                return newline + 1
            newline = pending.rfind(b"\n", 0, newline)
            if newline < 0:
                return 0
        return 0

    def _feeds(self, end: int, most: int) -> int:
        """How many line feeds come before `end`, counted up to `most` (all a skip needs to know:
        more cannot scroll the screen further, and counting every one would scan a whole flood)."""
        pending, count = self._pending, 0
        while count < most and (end := pending.rfind(b"\n", 0, end)) >= 0:
            count += 1
        return count

    def _last_reset(self, end: int) -> int:
        """Where the last SGR before `end` that resets every attribute starts (0 if none does)."""
        pending = self._pending
        # Each later search only looks after the reset found so far: a form the output never uses
        # would otherwise cost a scan of the whole backlog on every skip.
        if pending.rfind(b"\x1b", 0, end) < 0:
            return 0  # plain text: none of the searches below would find anything
        start = max(pending.rfind(b"\x1b[0m", 0, end), 0)
        start = max(pending.rfind(b"\x1b[m", start, end), start)
        other = pending.rfind(b"\x1b[0;", start, end)  # a first parameter 0 resets too
        while other > start:
            if SGR.match(pending, other):
                return other
            other = pending.rfind(b"\x1b[0;", start, other)
        return start

    def _drop_oldest(self) -> None:
        """Forget all but the last `keep` pending bytes, starting after a newline if one is near."""
        cut = len(self._pending) - self._keep
        newline = self._pending.find(b"\n", cut, cut + 64 * 1024)
        cut = newline + 1 if newline >= 0 else cut
        del self._pending[:cut]
        self._line_local = 0
        self._skipped += cut
        self.skipped_bytes += cut

    def _mark_skipped(self) -> None:
        """Restart the parser and write a marker line saying how much output was skipped."""
        screen = self._screen
        self._stream = GuardedStream(screen)
        screen.select_graphic_rendition(0)
        if screen.cursor.x:
            screen.carriage_return()
            screen.linefeed()
        screen.select_graphic_rendition(7)
        screen.draw(f"[ddptui: {_size(self._skipped)} of output skipped]")
        screen.select_graphic_rendition(0)
        screen.carriage_return()
        screen.linefeed()
        self._skipped = 0

    def _collect_changes(self) -> bool:
        """Move pyte's dirty lines into view rows; True if anything is to be redrawn."""
        screen = self._screen
        pushed, screen.pushed = screen.pushed, 0
        changed = bool(screen.dirty) or pushed > 0
        scroll = min(self._scroll + pushed, len(screen.history)) if self._scroll else 0
        if self._scroll or scroll:
            changed = changed or scroll != self._scroll
            self._scroll = scroll
            if changed:
                self.dirty.update(range(self.lines))
        else:
            self.dirty.update(y for y in screen.dirty if y < self.lines)
        screen.dirty.clear()
        cursor = self.cursor
        if cursor != self._last_cursor:
            rows = {cursor.y + self._scroll, self._last_cursor.y + self._scroll}
            self.dirty.update(y for y in rows if y < self.lines)
            self._last_cursor = cursor
            changed = True
        return changed
