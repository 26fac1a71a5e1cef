"""pyte hardened for untrusted rank output, and made faster where logs spend their time.

`ScrollbackScreen` adds a scrollback, an alternate screen and a fast path for printable ASCII;
`GuardedStream` loses only a bad sequence where pyte 0.8.2 raises and drops the rest of the chunk.
"""

from __future__ import annotations

import re
import unicodedata
from collections import deque
from typing import Any

import pyte
from pyte import modes
from pyte.screens import Char, Margins
from pyte.screens import wcwidth as pyte_wcwidth

from ddptui.term.runs import Cells, snapshot

DECCKM = 1 << 5
"""Application cursor keys: private mode 1, stored shifted by pyte."""
BRACKETED_PASTE = 2004 << 5
"""Bracketed paste: private mode 2004, stored shifted by pyte."""
_DECCOLM_PARAM = 3  # a rank must not resize our pane to 132 columns
_ALT_SCREEN_PARAMS = frozenset({47, 1047, 1049})
_MAX_SEQUENCE = 4096  # an unterminated OSC must not swallow the rest of the log
_CSI = re.compile(r"\x1b\[([<=>?]?)([0-9;:]*)([ -/]*)([@-~])")
"""A well-formed CSI sequence: prefix, parameters, intermediates, final."""
LINE_LOCAL = re.compile(rb"(?:[^\x00-\x06\x0e-\x1f\x7f\xc2]+|\x1b\[[0-9;]*[mKXGCD@P]|\xc2[\xa0-\xbf])*")
"""Bytes that act on the cursor's line only (matched from a parser at rest): text, BEL, BS, HT,
CR, LF/VT/FF (which move down), SGR and the in-line CSIs EL, ECH, CHA, CUF, CUB, ICH, DCH.
Nothing here moves the cursor up, reads another line, or changes a mode, margin or charset, so
lines that scroll off under such bytes cannot matter to what is drawn afterwards. `\xc2` is
allowed only before a printable Latin-1 character: `\xc2\x80`-`\xc2\x9f` decode to C1 controls."""
SGR = re.compile(rb"\x1b\[[0-9;]*m")
"""A select-graphic-rendition sequence as `LINE_LOCAL` allows it."""
_BAD_ESCAPE = re.compile(rb"\x1b(?!\[[0-9;]*[mKXGCD@P])")
"""An ESC that does not start one of `LINE_LOCAL`'s in-line CSIs."""
_BAD_LATIN1 = re.compile(rb"\xc2(?![\xa0-\xbf])")
"""A `\xc2` not followed by a printable Latin-1 character's second byte."""
_SUSPECT = bytes([*range(0x07), *range(0x0E, 0x20), 0x7F, 0xC2])
_UNSUSPECTED = bytes(b for b in range(256) if b not in _SUSPECT)


def line_local_end(data: bytes | bytearray, start: int) -> int:
    """Where the `LINE_LOCAL` bytes of `data` from `start` (a token boundary) end.

    Logs are nearly always line-local to the end: that is checked first (deleting the ordinary
    bytes, then looking for an ESC or `\xc2` that starts nothing allowed), several times faster
    than the pattern. Looking for a bad ESC, not matching every good one: a coloured log has an
    escape every 10 bytes, and a list of every match would cost far more than the check.
    """
    chunk = bytes(data[start:])
    rest = chunk.translate(None, _UNSUSPECTED)
    escapes, latin = rest.count(b"\x1b"), rest.count(b"\xc2")
    if (
        escapes + latin == len(rest)
        and (not escapes or _BAD_ESCAPE.search(chunk) is None)
        and (not latin or _BAD_LATIN1.search(chunk) is None)
    ):
        return len(data)
    found = LINE_LOCAL.match(data, start)
    assert found is not None  # the pattern matches the empty string
    return found.end()


def _all_narrow(data: str) -> bool:
    """Whether every character of `data` takes exactly one cell (ASCII, accents, box drawing)."""
    return set(map(pyte_wcwidth, data)) == {1}


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


class ScrollbackScreen(pyte.Screen):
    """A pyte screen with scrollback, an alternate screen, no query replies and a fast ASCII path."""

    def __init__(self, columns: int, lines: int, history: int) -> None:
        """A `columns` x `lines` screen keeping the last `history` lines scrolled off its top."""
        self.history: deque[Cells] = deque(maxlen=history)
        """Lines that left the top of the screen, oldest first."""
        self.pushed = 0
        """Lines added to `history` since the owner last looked (it resets this)."""
        self._alt: tuple[dict[int, Any], pyte.screens.Cursor] | None = None
        self._cells = _Cells(Char(" "))
        self._stand_ins = 0
        """Top lines standing in for output that was skipped (see `stand_in`): they leave the
        screen without entering the scrollback."""
        super().__init__(columns, lines)

    def draw(self, data: str) -> None:
        """Draw text; one-cell characters skip pyte's per-character `_replace` (5x faster).

        pyte stops drawing a chunk at its first control or non-combining zero-width character
        (a stray ^A, a zero-width joiner, an emoji variation selector): drop those instead.
        """
        data = data.translate(self.g1_charset if self.charset else self.g0_charset)
        if not (data.isascii() and data.isprintable()) and not _all_narrow(data):
            data = "".join(filter(_advances_or_combines, data))
            if not _all_narrow(data):
                super().draw(data)
                return
        if modes.IRM in self.mode:
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
            line.update(
                zip(range(cursor.x, cursor.x + take), map(cell, data[start : start + take]), strict=True)
            )
            cursor.x += take
            start += take
            self.dirty.add(cursor.y)

    def index(self) -> None:
        """Scroll as pyte does, keeping the line that leaves the top of the screen."""
        top, bottom = self.margins or Margins(0, self.lines - 1)
        if self.cursor.y == bottom and top == 0 and self._alt is None:
            if self._stand_ins:
                self._stand_ins -= 1
            else:
                self.history.append(snapshot(self.buffer.get(0), self.columns))
                self.pushed += 1
        super().index()

    def scrolls_whole_screen(self) -> bool:
        """Whether a line feed on the bottom line scrolls every line (no scroll region is set)."""
        return self.margins is None or tuple(self.margins) == (0, self.lines - 1)

    def stand_in(self, scrolled: int, marker: str) -> None:
        """Stand in for line-local output that was not emulated, which ended with CR LF at the bottom.

        What such output leaves on the screen is the cursor at the start of a blank bottom line and
        lines above it that the next `lines - 1` line feeds push out: those are left blank here,
        and leave without entering the scrollback.
        The lines it would have pushed to the scrollback (of those shown now: the `scrolled` top
        ones, up to the cursor's, which it writes on) go there, then `marker` in reverse video
        where its own lines would be.
        """
        if self._alt is None:
            shown = range(self._stand_ins, min(scrolled, self.cursor.y + 1))
            rows = [snapshot(self.buffer.get(y), self.columns) for y in shown]
            if rows and not rows[-1]:
                rows.pop()  # the cursor's line, still empty: the skipped output wrote it
            marked = Char(" ", reverse=True)
            rows.append(tuple(marked._replace(data=char) for char in marker[: self.columns]))
            self.history.extend(rows)
            self.pushed += len(rows)
            self._stand_ins = self.lines - 1
        self.buffer.clear()
        self.cursor.x, self.cursor.y = 0, self.lines - 1
        self.dirty.update(range(self.lines))

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
        self._stand_ins = 0
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
                if self._alt is None and y >= self._stand_ins:
                    self.history.append(snapshot(self.buffer.get(y), self.columns))
                    self.pushed += 1
            rows = {y - excess: row for y, row in self.buffer.items() if y >= excess}
            self.buffer.clear()
            self.buffer.update(rows)
            self.cursor.y -= excess
        self._stand_ins = max(min(self._stand_ins - max(excess, 0), lines - 1), 0)
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
        """Drop pyte's answers to terminal queries (DA `CSI c`, DSR `CSI 6 n`): never sent.

        A rank's pty input is what the user types into pdb; an answer written there would be
        read as typed text and merge with the next command (`(Pdb r0) 6c4Rn` is a SyntaxError).
        Ranks under ddptui are debugged, not interactive full-screen programs waiting on replies.
        """


class GuardedStream(pyte.ByteStream):
    """A byte stream that survives pyte's exceptions, losing only the offending sequence.

    pyte 0.8.2 raises on, among others, `CSI ? ... r`, `CSI ? ... m` and `CSI 5 J`, and its
    `Stream.feed` then drops the rest of the chunk. This is `Stream.feed` with each step guarded
    (a `try` costs nothing in Python 3.11 until it raises) and runaway sequences cut off. At the
    ground state, control characters and well-formed CSI sequences are dispatched directly instead
    of one character at a time through pyte's parser coroutine (3x faster on coloured logs);
    CSI sequences with `<=>` prefixes, intermediates or `:` sub-parameters are ignored, where pyte
    would misread `CSI > 4;1 m` as bold underline or draw the rest of `CSI 38:2::1:2:3 m`.
    """

    def __init__(self, screen: pyte.Screen) -> None:
        """A stream drawing on `screen`."""
        super().__init__(screen)
        self._basic = {
            char: getattr(screen, name) for char, name in self.basic.items() if char not in "\x0e\x0f"
        }
        self._csi = {final: getattr(screen, name) for final, name in self.csi.items()}
        self._end = 0
        self._in_sequence = 0  # characters the parser has taken since it last left the ground state

    def at_rest(self) -> bool:
        """Whether the parser is in the ground state with no partial UTF-8 character held."""
        held = self.utf8_decoder.getstate()[0] if self.use_utf8 else b""
        return bool(self._taking_plain_text) and not self._in_sequence and not held

    def feed(self, data: bytes | bytearray) -> None:  # type: ignore[override]
        """Decode `data` (split UTF-8 is kept for the next call) and run it through the parser."""
        text = self.utf8_decoder.decode(data) if self.use_utf8 else data.decode("latin-1")
        plain, in_sequence = self._taking_plain_text, self._in_sequence
        offset, length, self._end = 0, len(text), 0
        while offset < length:
            try:
                if plain:
                    advanced = self._ground(text, offset)
                    plain = advanced > offset
                    offset = advanced
                else:
                    offset += 1
                    plain = self._send_to_parser(text[offset - 1])
                    in_sequence = 0 if plain else in_sequence + 1
                    if in_sequence > _MAX_SEQUENCE:
                        self._initialize_parser()
                        plain, in_sequence = True, 0
            except Exception:
                if plain:
                    offset = max(offset + 1, self._end)
                plain, in_sequence = True, 0
        self._taking_plain_text, self._in_sequence = plain, in_sequence

    def _ground(self, text: str, offset: int) -> int:
        """Handle text, a control or a CSI sequence at `offset`; where it ends, or `offset` if none.

        The end is stored in `_end` before a handler runs, so one that raises loses only its own
        text or sequence.
        """
        match = self._text_pattern.match(text, offset)
        if match:
            assert self.listener is not None
            self._end = match.end()
            self.listener.draw(text[offset : self._end])
            return self._end
        handler = self._basic.get(text[offset])
        if handler is not None:
            self._end = offset + 1
            handler()
            return self._end
        csi = _CSI.match(text, offset)
        if csi is None:
            return offset
        self._end = csi.end()
        prefix, params, intermediates, final = csi.groups()
        handler = self._csi.get(final)
        if handler is not None and not intermediates and prefix in ("", "?") and ":" not in params:
            args = [min(int(param or 0), 9999) for param in params.split(";")]
            if prefix:
                handler(*args, private=True)
            else:
                handler(*args)
        return self._end
