"""A display-only terminal pane for one rank, drawn on the Line API from a `TermScreen`."""

from __future__ import annotations

from dataclasses import dataclass, field
from time import monotonic
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.content import Content
from textual.geometry import Region, Size
from textual.message import Message
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from ddptui.term.backfill import Backfill, Output
from ddptui.term.keys import key_to_bytes
from ddptui.term.screen import Attr, Run, TermScreen
from ddptui.ui.cell_style import attr_style, reverse_cell
from ddptui.ui.pane_turns import TURNS


class RankPane(Widget, can_focus=True):
    """One rank's terminal: draws what the rank printed and posts what is typed into it.

    It owns no process. Bytes come in through `feed` and are emulated on a timer within a time
    budget per frame, so a flood never blocks the event loop; keys and pastes go out as
    `RankPane.Input`, a new size as `RankPane.Resized`, for the app to write to the rank's pty.
    Every key is typed into the rank except `PASSTHROUGH_KEYS` (left to the app's bindings) and
    shift+pageup/pagedown, which scroll back like the mouse wheel. A pane that is not on screen
    does not emulate: its backlog is capped (see `TermScreen`) and caught up once it is shown.
    """

    PASSTHROUGH_KEYS: ClassVar[frozenset[str]] = frozenset(
        {f"f{n}" for n in range(1, 13)} | {"ctrl+q", "ctrl+o"}
    )
    """Keys not typed into the rank, so the app's bindings (leave the pane, quit) still work."""

    FRAME_INTERVAL: ClassVar[float] = 1 / 30
    """Seconds between emulation frames."""

    FRAME_BUDGET: ClassVar[float] = 0.002
    """Seconds of emulation a pane may spend per frame; the rest waits for the next one."""

    FLOOD_BACKLOG: ClassVar[int] = 2048
    """Pending bytes above which a pane is flooding (it then emulates only for a repaint)."""

    STEP: ClassVar[int] = 512
    """Bytes emulated between two checks of the frame budget: about 0.7 ms on a slow core
    (emulation runs at 0.7 MB/s there), so a frame overshoots its budget by that much at most."""

    SKIP_WORK: ClassVar[int] = 2048
    """Bytes a flood frame may emulate to get past output that stops a skip (see `skip_ahead`)."""

    BACKFILL_BUDGET: ClassVar[float] = 0.004
    """Seconds per frame a pane at rest may spend emulating a skipped flood again (`Backfill`)."""

    WHEEL_LINES: ClassVar[int] = 3
    """Lines scrolled per mouse-wheel notch."""

    @dataclass
    class Input(Message):
        """Bytes typed or pasted into a rank's pane, to write to that rank's pty."""

        rank: int
        """The rank typed into."""
        data: bytes
        """What an xterm would have sent."""
        pane: RankPane | None = field(default=None, repr=False)
        """The pane typed into."""

        @property
        def control(self) -> RankPane | None:
            """The pane typed into (alias of `pane`)."""
            return self.pane

    @dataclass
    class Resized(Message):
        """A pane's text area changed size: set the rank's pty to it (TIOCSWINSZ)."""

        rank: int
        """The rank whose pane changed."""
        columns: int
        """The new width in cells."""
        lines: int
        """The new height in lines."""
        pane: RankPane | None = field(default=None, repr=False)
        """The pane that changed."""

        @property
        def control(self) -> RankPane | None:
            """The pane that changed (alias of `pane`)."""
            return self.pane

        def can_replace(self, message: Message) -> bool:
            """A newer size of the same pane supersedes an older one still queued."""
            return isinstance(message, RankPane.Resized) and message.pane is self.pane

    def __init__(
        self,
        rank: int,
        *,
        columns: int = 80,
        lines: int = 24,
        history: int = 5000,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        """Create the pane of `rank`, emulating a `columns` x `lines` terminal until laid out,
        keeping `history` lines of scrollback."""
        self._styles_for: dict[Attr, Style] = {}
        self._strips: dict[int, Strip] = {}
        self._painted = 0.0
        """Rendered rows of the view, dropped when the screen marks them dirty: a full repaint
        (a layout anywhere in the app) then costs almost nothing for rows that did not change."""
        self._base_style: Style | None = None
        super().__init__(id=id, classes=classes)
        self.rank = rank
        """The rank shown."""
        self.history = history
        """Lines of scrollback kept."""
        self._screen = TermScreen(columns, lines, history)
        self.source: Output | None = None
        """The core's copy of the rank's output, for the scrollback of a skipped flood (`Backfill`)."""
        self._backfill: Backfill | None = None
        self._fed_at = 0.0
        self._backfilled = 0
        """`skipped_bytes` when the last backfill began: a new one waits for more skipping."""
        self._posted_size: tuple[int, int] | None = None
        self._frames: Timer | None = None
        self._resting = False
        """True while the frame timer is paused, until output arrives."""
        self._skipping = True
        """The last flood repaint could skip ahead: until the next, pending output just waits."""
        self.border_title = f"rank {rank}"
        self.identity = ""
        """Who the rank is (`local rank 0 · node3 · pid 4242`), once it said so."""

    @property
    def terminal(self) -> TermScreen:
        """The emulated terminal (text, scrollback, modes) behind the pane."""
        return self._screen

    def feed(self, data: bytes) -> None:
        """Queue output of the rank; it is emulated and drawn on the next frames."""
        self._screen.feed(data)
        self._fed_at = monotonic()
        if self._resting:
            self._wake()

    def _wake(self) -> None:
        """Run the frames again (output arrived after a rest)."""
        if self._frames is not None and self._resting:
            self._resting = False
            self._frames.resume()

    def scroll_back(self, lines: int) -> None:
        """Scroll the view `lines` back into the scrollback (negative: towards the live screen)."""
        if self._screen.scroll(lines):
            self._show_scroll()
            self._refresh_dirty()

    def get_content_width(self, container: Size, viewport: Size) -> int:
        """Width under `width: auto`: the emulated terminal's."""
        return self._screen.columns

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        """Height under `height: auto`: the emulated terminal's."""
        return self._screen.lines

    def on_mount(self) -> None:
        """Start the emulation frames, each pane at its own phase.

        Panes whose frames and flood repaints coincide would all repaint in one screen update:
        spread over the interval, each update carries about one pane.
        """
        phase = (self.rank % 8) / 8
        self._painted = monotonic() - TURNS.FLOOD_REPAINT * phase
        if phase:
            self.set_timer(self.FRAME_INTERVAL * phase, self._start_frames)
        else:
            self._start_frames()

    def _start_frames(self) -> None:
        """Emulate on a timer from now on."""
        self._frames = self.set_interval(self.FRAME_INTERVAL, self._frame, name=f"rank-pane-{self.rank}")
        self._frame()

    def on_resize(self, event: events.Resize) -> None:
        """Fit the terminal to the text area and tell the app the new size once."""
        columns, lines = self.size
        if columns < 1 or lines < 1:
            return
        self._screen.resize(columns, lines)
        self._backfill = None  # made at the old size: it could never match
        self._strips.clear()
        if (columns, lines) != self._posted_size:
            self._posted_size = (columns, lines)
            self.post_message(self.Resized(self.rank, columns, lines, self))
        self.refresh()

    def on_key(self, event: events.Key) -> None:
        """Type the key into the rank, except passthrough and scrollback keys."""
        if event.key in self.PASSTHROUGH_KEYS:
            return
        if event.key in ("shift+pageup", "shift+pagedown"):
            page = max(self._screen.lines - 1, 1)
            self.scroll_back(page if event.key == "shift+pageup" else -page)
        else:
            data = key_to_bytes(event.key, event.character, self._screen.app_cursor)
            if data is None:
                return
            self.scroll_back(-self._screen.scroll_offset)
            self.post_message(self.Input(self.rank, data, self))
        event.stop()
        event.prevent_default()

    def on_paste(self, event: events.Paste) -> None:
        """Type pasted text, bracketed if the rank asked for it; newlines become CR as in xterm."""
        text = event.text.replace("\r\n", "\r").replace("\n", "\r")
        if self._screen.bracketed_paste:
            text = "\x1b[200~" + text.replace("\x1b[201~", "") + "\x1b[201~"
        self.post_message(self.Input(self.rank, text.encode("utf-8", "replace"), self))
        event.stop()
        event.prevent_default()

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        """Scroll back into the scrollback."""
        self.scroll_back(self.WHEEL_LINES)
        event.stop()

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        """Scroll towards the live screen."""
        self.scroll_back(-self.WHEEL_LINES)
        event.stop()

    def on_focus(self) -> None:
        """Show the cursor."""
        self._refresh_cursor_row()

    def on_blur(self) -> None:
        """Hide the cursor."""
        self._refresh_cursor_row()

    def notify_style_update(self) -> None:
        """Drop the cached styles: the theme or the pane's CSS changed."""
        super().notify_style_update()
        self._base_style = None
        self._styles_for.clear()
        self._strips.clear()

    def render_line(self, y: int) -> Strip:
        """Row `y` of the view: one segment per run, cut or padded to the pane's width."""
        if self._base_style is None:
            self._base_style = self.rich_style
        width = self.size.width
        strip = self._strips.get(y)
        if strip is None or strip.cell_length != width:
            strip = self._strips[y] = self._strip(self._screen.line_runs(y), width)
        cursor = self._screen.cursor
        if y == cursor.y and cursor.x < width and self._shows_cursor():
            left, cell, right = strip.divide([cursor.x, cursor.x + 1, width])
            strip = Strip.join([left, reverse_cell(cell), right])
        return strip

    def _strip(self, runs: list[Run], width: int) -> Strip:
        """One segment per run, padded with the pane's style or cut to exactly `width` cells."""
        style = self._style
        segments = [Segment(text, style(attr)) for text, attr in runs]
        length = sum(cell_len(text) for text, _ in runs)
        if length > width:
            return Strip(segments, length).crop(0, width)
        if length < width:
            segments.append(Segment(" " * (width - length), self._base_style))
        return Strip(segments, width)

    def _style(self, attr: Attr) -> Style:
        """The widget's style with `attr` on top, cached per look."""
        style = self._styles_for.get(attr)
        if style is None:
            style = self._styles_for[attr] = (self._base_style or Style()) + attr_style(attr)
        return style

    def _shows_cursor(self) -> bool:
        """Whether the cursor is drawn: focused, not hidden by the rank, view at the bottom."""
        return self.has_focus and not self._screen.cursor.hidden and not self._screen.scroll_offset

    def _frame(self) -> None:
        """Emulate pending output within the frame budget, then redraw the rows that changed.

        In a flood (more pending than a step), output is emulated only for a repaint, after
        skipping what cannot show (`TermScreen.skip_ahead`): between repaints it just waits.
        Output that cannot be skipped (cursor moves up, modes) is emulated every frame instead.
        """
        screen = self._screen
        flooding = screen.pending > self.FLOOD_BACKLOG
        now = monotonic()
        due = TURNS.flood_due(now, self._painted, self._fed_at)
        shown = self.is_on_screen
        if flooding and due and shown:
            TURNS.take_flood_turn(now)
        if screen.pending and shown and (due or not flooding or not self._skipping):
            if flooding:
                self._skipping = screen.skip_ahead(self.SKIP_WORK) > 0
            deadline = now + self.FRAME_BUDGET
            while screen.pending and monotonic() < deadline:
                screen.process(self.STEP)
            self._show_scroll()
        # A pane that keeps up also redraws whole as it scrolls: while keys hold flood repaints
        # back, it waits as well (it would be the key's screen update's cost otherwise).
        held = not due and TURNS.holding(now) and self._redraws_whole()
        if (not flooding or not screen.pending or due) and not held:
            self._painted = now
            self._refresh_dirty()
        owed = self.source is not None and screen.skipped_bytes > self._backfilled
        if shown and (owed or self._backfill is not None) and TURNS.backfill_turn(now, self._fed_at):
            self._backfill_step(now)  # the flood is over
        if (
            not screen.pending
            and not screen.dirty
            and not (owed and shown)
            and self._backfill is None
            and self._frames is not None
        ):
            self._resting = True  # nothing to do until output comes: an idle pane costs no CPU
            self._frames.pause()

    def _backfill_step(self, now: float) -> None:
        """After a flood was skipped, emulate the core's copy of it again, a little each frame;
        take its scrollback once its screen is exactly the live one (see `Backfill`)."""
        screen = self._screen
        if self._backfill is None:
            if self.source is None or screen.pending:
                return
            self._backfilled = screen.skipped_bytes
            self._backfill = Backfill(self.source, screen.columns, screen.lines, self.history)
        backfill = self._backfill
        if not backfill.step(now + self.BACKFILL_BUDGET, monotonic) or screen.pending:
            if backfill.failed:
                self._backfill = None
            return
        self._backfill = None
        if backfill.screen.same_screen(screen):
            offset = screen.scroll_offset
            backfill.screen.skipped_bytes = self._backfilled
            self._screen = backfill.screen
            self._screen.scroll(offset)
            self._strips.clear()
            self._show_scroll()
            self.refresh()

    def _show_scroll(self) -> None:
        """Mark a scrolled-back view with the `-scrolled` class and a subtitle saying how far."""
        offset = self._screen.scroll_offset
        self.set_class(offset > 0, "-scrolled")
        subtitle = Content(f"scrolled back {offset} lines" if offset else self.identity)  # plain, not markup
        if self.border_subtitle != subtitle.markup:
            self.border_subtitle = subtitle

    def show_identity(self, text: str) -> None:
        """Who the rank is (local rank, host, pid), shown under the pane unless it is scrolled back."""
        self.identity = text
        self._show_scroll()

    def _redraws_whole(self) -> bool:
        """True when most rows are dirty: the pane is then redrawn whole (as when it scrolled)."""
        return len(self._screen.dirty) * 2 > self._screen.lines

    def _refresh_dirty(self) -> None:
        """Repaint the view rows the screen marked dirty (all of them if most changed)."""
        dirty = self._screen.dirty
        if not dirty:
            return
        for y in dirty:
            self._strips.pop(y, None)
        width = self.size.width
        if self._redraws_whole():
            self.refresh()
        else:
            self.refresh(*(Region(0, y, width, 1) for y in dirty))
        dirty.clear()

    def _refresh_cursor_row(self) -> None:
        """Repaint the cursor's row (focus changed)."""
        self._screen.dirty.add(self._screen.cursor.y)
        self._refresh_dirty()
