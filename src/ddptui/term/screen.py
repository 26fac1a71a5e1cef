"""One rank's terminal: raw bytes in, lines of attribute runs out, emulated lazily with pyte.

The core drains every pty at full speed and hands the bytes to `TermScreen.feed`, which only
appends them to a buffer. The UI calls `TermScreen.process` with a budget on its own schedule, so
a slow emulator can never slow a rank down (that would change the timing of its collectives).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import groupby
from operator import itemgetter
from typing import Any, NamedTuple

import unicodedata

import pyte
from pyte import modes
from pyte.screens import Char, Margins
from pyte.screens import wcwidth as pyte_wcwidth

_DECCKM = 1 << 5  # private mode 1, stored shifted by pyte
_BRACKETED_PASTE = 2004 << 5
_DECCOLM_PARAM = 3  # a rank must not resize our pane to 132 columns
_ALT_SCREEN_PARAMS = frozenset({47, 1047, 1049})
_MAX_SEQUENCE = 4096  # an unterminated OSC must not swallow the rest of the log
_MAX_REPLIES = 64


class Attr(NamedTuple):
    """The look of a run of cells, as pyte names it (colours are names or "rrggbb")."""

    fg: str = "default"
    bg: str = "default"
    bold: bool = False
    italics: bool = False
    underscore: bool = False
    strikethrough: bool = False
    reverse: bool = False
    blink: bool = False


DEFAULT_ATTR = Attr()
Run = tuple[str, Attr]
"""Text drawn with one `Attr`."""
Line = tuple[Run, ...]
Cells = tuple[Char, ...]
"""A line as pyte cells; the scrollback keeps these and makes runs only for what is shown."""


class Cursor(NamedTuple):
    """Where the cursor is on the live screen (not the scrolled view)."""

    x: int
    y: int
    hidden: bool


_DATA = itemgetter(0)
_ATTR_KEY = itemgetter(slice(1, None))  # a Char's fields after `data`, in `Attr` order
_ATTRS: dict[tuple[Any, ...], Attr] = {tuple(DEFAULT_ATTR): DEFAULT_ATTR}


def _intern(key: tuple[Any, ...]) -> Attr:
    """Share one `Attr` per distinct look, so runs and style caches stay small."""
    attr = _ATTRS.get(key)
    if attr is None:
        if len(_ATTRS) > 4096:  # hostile 24-bit colours must not grow this forever
            _ATTRS.clear()
        attr = _ATTRS[key] = Attr._make(key)
    return attr


def _fix_stubs(cells: Iterable[Char]) -> list[Char]:
    """Blank the stub of a wide character that has been overwritten, keeping columns aligned."""
    fixed = []
    after_wide = False
    for cell in cells:
        if not cell.data and not after_wide:
            cell = cell._replace(data=" ")
        after_wide = bool(cell.data) and pyte_wcwidth(cell.data[0]) == 2
        fixed.append(cell)
    return fixed


_RANGE = list(range(1024))


def snapshot(line: dict[int, Char] | None, columns: int) -> Cells:
    """The cells of a pyte line from column 0, cut at `columns`: cheap enough for every scroll.

    Lines written left to right (nearly all) are copied straight from the dict's values.
    """
    if not line:
        return ()
    width = len(line)
    if width <= columns and list(line) == _RANGE[:width]:
        return tuple(line.values())
    return tuple(map(line.__getitem__, range(min(max(line) + 1, columns))))


def cells_to_runs(cells: Cells) -> Line:
    """Runs of equal attributes over `cells`, dropping trailing default blanks."""
    if "" in map(_DATA, cells):
        cells = tuple(_fix_stubs(cells))
    runs = [("".join(map(_DATA, group)), _intern(key)) for key, group in groupby(cells, _ATTR_KEY)]
    if runs and runs[-1][1] is DEFAULT_ATTR:
        text = runs[-1][0].rstrip(" ")
        runs[-1:] = [(text, DEFAULT_ATTR)] if text else []
    return tuple(runs)


def _advances_or_combines(char: str) -> bool:
    """Whether pyte can draw `char`: it takes cells, or combines with the previous one."""
    width = pyte_wcwidth(char)
    return width > 0 or (width == 0 and unicodedata.combining(char) != 0)


class _Cells(dict[str, Char]):
    """The cells one set of attributes draws, made once per character and shared."""

    def __init__(self, attrs: Char) -> None:
        super().__init__()
        self.attrs = attrs

    def __missing__(self, char: str) -> Char:
        cell = self[char] = self.attrs._replace(data=char)
        return cell


_CELLS: dict[tuple[Any, ...], _Cells] = {}


def _cells_for(attrs: Char) -> _Cells:
    """The shared cell cache for a look, so equal-looking text shares its `Char` objects."""
    key = attrs[1:]
    cells = _CELLS.get(key)
    if cells is None:
        if len(_CELLS) > 1024:
            _CELLS.clear()
        cells = _CELLS[key] = _Cells(attrs)
    return cells


class _Screen(pyte.Screen):
    """A pyte screen with scrollback, an alternate screen, query replies and a fast ASCII path."""

    def __init__(self, columns: int, lines: int, history: int) -> None:
        self.history: deque[Cells] = deque(maxlen=history)
        self.pushed = 0
        self.replies: list[str] = []
        self._alt: tuple[dict[int, Any], pyte.screens.Cursor] | None = None
        self._cells = _Cells(Char(" "))
        super().__init__(columns, lines)

    def draw(self, data: str) -> None:
        """Draw text; printable ASCII skips pyte's per-character `_replace` (5x faster).

        pyte stops drawing a chunk at its first control or non-combining zero-width character
        (a stray `\x01`, a zero-width joiner, an emoji variation selector): drop those instead.
        """
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        if not (data.isascii() and data.isprintable()):
            data = "".join(filter(_advances_or_combines, data))
        if not (data.isascii() and data.isprintable()) or modes.IRM in self.mode:
            super().draw(data)
            return
        cursor = self.cursor
        if self._cells.attrs is not cursor.attrs:
            self._cells = _cells_for(cursor.attrs)
        cell = self._cells.__getitem__
        start, end, columns = 0, len(data), self.columns
        while start < end:
            if cursor.x >= columns:
                if modes.DECAWM in self.mode:
                    self.dirty.add(cursor.y)
                    self.carriage_return()
                    self.linefeed()
                else:
                    cursor.x = columns - 1
            take = min(end - start, columns - cursor.x)
            line = self.buffer[cursor.y]
            line.update(zip(range(cursor.x, cursor.x + take), map(cell, data[start : start + take])))
            cursor.x += take
            start += take
            self.dirty.add(cursor.y)

    def index(self) -> None:
        """Scroll as pyte does, keeping the line that leaves the top of the screen."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0 and self._alt is None:
            self.history.append(snapshot(self.buffer.get(0), self.columns))
            self.pushed += 1
        super().index()

    def set_mode(self, *params: int, **kwargs: Any) -> None:
        """Set modes, ignoring column switching and emulating the alternate screen."""
        if kwargs.get("private"):
            params = tuple(p for p in params if p != _DECCOLM_PARAM)
            if _ALT_SCREEN_PARAMS.intersection(params) and self._alt is None:
                saved = pyte.screens.Cursor(self.cursor.x, self.cursor.y, self.cursor.attrs)
                self._alt = (dict(self.buffer), saved)
                self.buffer.clear()
                self.dirty.update(range(self.lines))
        super().set_mode(*params, **kwargs)

    def reset_mode(self, *params: int, **kwargs: Any) -> None:
        """Reset modes, ignoring column switching and leaving the alternate screen."""
        if kwargs.get("private"):
            params = tuple(p for p in params if p != _DECCOLM_PARAM)
            if _ALT_SCREEN_PARAMS.intersection(params) and self._alt is not None:
                buffer, cursor = self._alt
                self._alt = None
                self.buffer.clear()
                self.buffer.update(buffer)
                self.cursor.x, self.cursor.y = cursor.x, cursor.y
                self._clip(self.lines, self.columns)
        super().reset_mode(*params, **kwargs)

    def reset(self) -> None:
        """Reset as pyte does (RIS), which also leaves the alternate screen."""
        self._alt = None
        super().reset()

    def erase_in_display(self, how: int = 0, *args: Any, **kwargs: Any) -> None:
        """Erase as pyte does, except that `CSI 3 J` clears the scrollback only, as in xterm."""
        if how == 3:
            self.history.clear()
            return
        super().erase_in_display(how, *args, **kwargs)

    def resize(self, lines: int | None = None, columns: int | None = None) -> None:
        """Resize keeping the cursor's line: lines above it go to the scrollback when shrinking.

        pyte's own resize deletes lines from the top regardless of the cursor, losing them and
        leaving the cursor over the wrong line.
        """
        lines, columns = lines or self.lines, columns or self.columns
        if (lines, columns) == (self.lines, self.columns):
            return
        excess = self.cursor.y + 1 - lines
        if excess > 0:
            for y in range(excess):
                if self._alt is None:
                    self.history.append(snapshot(self.buffer.get(y), self.columns))
                    self.pushed += 1
            rows = {y - excess: row for y, row in self.buffer.items() if y >= excess}
            self.buffer.clear()
            self.buffer.update(rows)
            self.cursor.y -= excess
        if columns > self.columns:
            self.tabstops.update(range((self.columns // 8 + 1) * 8, columns, 8))
        self._clip(lines, columns)
        self.lines, self.columns = lines, columns
        self.margins = None
        self.ensure_hbounds()
        self.ensure_vbounds()
        self.dirty.update(range(lines))

    def _clip(self, lines: int, columns: int) -> None:
        """Drop rows and cells outside `lines` x `columns`."""
        for y in [y for y in self.buffer if y >= lines]:
            del self.buffer[y]
        for row in self.buffer.values():
            for x in [x for x in row if x >= columns]:
                del row[x]
        self.cursor.y = min(self.cursor.y, lines - 1)
        self.cursor.x = min(self.cursor.x, columns)
        self.dirty.update(range(lines))

    def write_process_input(self, data: str) -> None:
        """Keep answers to the rank's terminal queries (cursor position, device attributes)."""
        if len(self.replies) < _MAX_REPLIES:
            self.replies.append(data)


class _GuardedStream(pyte.ByteStream):
    """A byte stream that survives pyte's exceptions, losing only the offending sequence.

    pyte 0.8.2 raises on, among others, `CSI ? ... r`, `CSI ? ... m` and `CSI 5 J`, and its
    `Stream.feed` then drops the rest of the chunk. This is `Stream.feed` with the step guarded
    (a `try` costs nothing in Python 3.11 until it raises) and runaway sequences cut off.
    """

    def feed(self, data: bytes) -> None:  # type: ignore[override]
        """Decode `data` (split UTF-8 is kept for the next call) and run it through the parser."""
        text = self.utf8_decoder.decode(data) if self.use_utf8 else data.decode("latin-1")
        assert self.listener is not None
        send, draw = self._send_to_parser, self.listener.draw
        match_text = self._text_pattern.match
        plain, in_sequence = self._taking_plain_text, 0
        offset, length = 0, len(text)
        while offset < length:
            try:
                if plain:
                    match = match_text(text, offset)
                    if match:
                        start, offset = match.span()
                        draw(text[start:offset])
                    else:
                        plain = False
                else:
                    offset += 1
                    plain = send(text[offset - 1])
                    in_sequence = 0 if plain else in_sequence + 1
                    if in_sequence > _MAX_SEQUENCE:
                        self._initialize_parser()
                        plain, in_sequence = True, 0
            except Exception:  # noqa: BLE001 - any pyte failure: skip the sequence, keep going
                plain, in_sequence = True, 0
        self._taking_plain_text = plain


def _text(line: Iterable[Run]) -> str:
    """The characters of a line, without trailing blanks."""
    return "".join(text for text, _ in line).rstrip()


def _cells_text(cells: Cells) -> str:
    """The characters of a line of cells, without trailing blanks."""
    return _text(cells_to_runs(cells))


class TermScreen:
    """The emulated terminal of one rank: a pending byte buffer, a pyte screen and a scrollback.

    `feed` only appends bytes; `process` runs pyte on at most `budget` of them. When more than
    `max_pending` bytes wait (the rank writes faster than we emulate), the oldest are dropped and
    only the last `keep` bytes, cut at a newline, are replayed, after a "skipped" marker line. The
    final screen of a log flood is therefore right (its last lines), but the scrollback has a gap.
    A sequence split by the cut (a colour spanning lines, a cursor move) may look wrong until the
    next full redraw; the core keeps every byte, so nothing is lost for good.
    """

    def __init__(
        self,
        columns: int,
        lines: int,
        history: int = 5000,
        *,
        max_pending: int = 1024 * 1024,
        keep: int = 128 * 1024,
    ) -> None:
        self._screen = _Screen(columns, lines, history)
        self._stream = _GuardedStream(self._screen)
        self._pending = bytearray()
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
        return _DECCKM in self._screen.mode

    @property
    def bracketed_paste(self) -> bool:
        """Whether the rank asked for bracketed paste (`CSI ? 2004 h`)."""
        return _BRACKETED_PASTE in self._screen.mode

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

    def feed(self, data: bytes) -> None:
        """Queue bytes from the rank's pty; no emulation happens here."""
        self._pending += data
        if len(self._pending) > self._max_pending:
            self._drop_oldest()

    def process(self, budget: int = 256 * 1024) -> bool:
        """Emulate at most `budget` pending bytes; True when the view changed."""
        if self._skipped:
            self._mark_skipped()
        if self._pending:
            chunk = self._pending[:budget]
            del self._pending[:budget]
            self._stream.feed(chunk)  # type: ignore[arg-type]
        return self._collect_changes()

    def take_replies(self) -> bytes:
        """Answers to the rank's terminal queries since the last call, to write to its pty."""
        replies, self._screen.replies = self._screen.replies, []
        return "".join(replies).encode()

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

    def _drop_oldest(self) -> None:
        """Forget all but the last `keep` pending bytes, starting after a newline if one is near."""
        cut = len(self._pending) - self._keep
        newline = self._pending.find(b"\n", cut, cut + 64 * 1024)
        cut = newline + 1 if newline >= 0 else cut
        del self._pending[:cut]
        self._skipped += cut
        self.skipped_bytes += cut

    def _mark_skipped(self) -> None:
        """Restart the parser and write a marker line saying how much output was skipped."""
        screen = self._screen
        self._stream = _GuardedStream(screen)
        screen.select_graphic_rendition(0)
        if screen.cursor.x:
            screen.carriage_return()
            screen.linefeed()
        screen.select_graphic_rendition(7)
        screen.draw(f"[ddptui: {self._skipped / 1048576:.1f} MiB of output skipped]")
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
