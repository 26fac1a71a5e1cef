"""RankPane in a real Textual app: drawing, cutting, cursor, scrollback, keys, paste, resize."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import ClassVar

import pytest
from conftest import until
from rich.color import Color
from textual import events
from textual.app import App, ComposeResult
from textual.binding import BindingType
from textual.message import Message

import ddptui.ui
from ddptui.ui.pane_turns import TURNS
from ddptui.ui.rank_pane import RankPane

TCSS = Path(ddptui.ui.__file__).parent / "rank_pane.tcss"


class PaneApp(App[None]):
    """One rank pane, recording the messages it posts."""

    CSS_PATH = TCSS
    BINDINGS: ClassVar[list[BindingType]] = [
        ("f5", "mark('f5')"),
        ("ctrl+o", "mark('ctrl+o')"),
        ("x", "mark('x')"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.posted: list[Message] = []
        self.marks: list[str] = []

    def action_mark(self, name: str) -> None:
        self.marks.append(name)

    def compose(self) -> ComposeResult:
        yield RankPane(3, id="pane")

    def on_rank_pane_input(self, message: RankPane.Input) -> None:
        self.posted.append(message)

    def on_rank_pane_resized(self, message: RankPane.Resized) -> None:
        self.posted.append(message)

    def inputs(self) -> list[bytes]:
        return [m.data for m in self.posted if isinstance(m, RankPane.Input)]


def rows(pane: RankPane) -> list[str]:
    """The text of every row the pane draws, without trailing blanks."""
    return [pane.render_line(y).text.rstrip() for y in range(pane.size.height)]


@pytest.mark.asyncio
async def test_fed_bytes_are_drawn_with_their_colours() -> None:
    app = PaneApp()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(RankPane)
        pane.feed(b"hello \x1b[31mred\x1b[0m world\r\n(Pdb) ")
        await until(pilot, lambda: rows(pane)[1].startswith("(Pdb)"), timeout=5)
        strip = pane.render_line(0)
        assert strip.text.rstrip() == "hello red world"
        assert strip.cell_length == pane.size.width
        red = [seg for seg in strip if seg.text == "red"]
        assert red and red[0].style is not None
        assert red[0].style.color == Color.parse("red")
        assert "hello" in app.export_screenshot()


@pytest.mark.asyncio
async def test_pane_sizes_its_terminal_and_reports_it() -> None:
    app = PaneApp()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(RankPane)
        await until(pilot, lambda: any(isinstance(m, RankPane.Resized) for m in app.posted), timeout=5)
        resized = [m for m in app.posted if isinstance(m, RankPane.Resized)][-1]
        assert (resized.rank, resized.columns, resized.lines) == (3, 58, 10)  # inside the border
        assert resized.control is pane
        assert (pane.terminal.columns, pane.terminal.lines) == (58, 10)
        await pilot.resize_terminal(40, 8)
        await until(pilot, lambda: pane.terminal.columns == 38, timeout=5)
        await until(pilot, lambda: app.posted[-1] == RankPane.Resized(3, 38, 6, pane), timeout=5)


@pytest.mark.asyncio
async def test_lines_are_cut_at_the_pane_width() -> None:
    app = PaneApp()
    async with app.run_test(size=(100, 12)) as pilot:
        pane = app.query_one(RankPane)
        pane.feed(b"y" * 90 + b"\r\n")
        await until(pilot, lambda: rows(pane)[0].startswith("y"), timeout=5)
        await pilot.resize_terminal(42, 12)
        await until(pilot, lambda: pane.size.width == 40, timeout=5)
        await until(pilot, lambda: rows(pane)[0] == "y" * 40, timeout=5)
        assert all(pane.render_line(y).cell_length == 40 for y in range(pane.size.height))


@pytest.mark.asyncio
async def test_cursor_is_drawn_reversed_when_focused() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(RankPane)
        pane.feed(b"(Pdb) ")
        await until(pilot, lambda: rows(pane)[0].startswith("(Pdb)"), timeout=5)
        pane.focus()
        await pilot.pause()
        cell = pane.render_line(0).crop(6, 7)
        assert [seg.style.reverse for seg in cell if seg.style] == [True]
        pane.blur()
        await pilot.pause()
        assert not any(seg.style and seg.style.reverse for seg in pane.render_line(0))


@pytest.mark.asyncio
async def test_scrollback_by_wheel_and_shift_pageup() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(RankPane)
        pane.focus()
        pane.feed(b"".join(b"line %d\r\n" % i for i in range(50)))
        await until(pilot, lambda: "line 49" in "\n".join(rows(pane)), timeout=5)
        wheel = events.MouseScrollUp(pane, 0, 0, 0, -1, 0, False, False, False)
        pane.post_message(wheel)
        await until(pilot, lambda: pane.terminal.scroll_offset == RankPane.WHEEL_LINES, timeout=5)
        assert pane.has_class("-scrolled")
        await pilot.press("shift+pageup")
        assert pane.terminal.scroll_offset == RankPane.WHEEL_LINES + pane.size.height - 1
        assert rows(pane)[0] == "line 37"
        await pilot.press("x")  # typing returns to the live screen
        assert pane.terminal.scroll_offset == 0
        assert not pane.has_class("-scrolled")
        assert app.inputs() == [b"x"]


@pytest.mark.asyncio
async def test_keys_on_focused_pane_become_input_messages() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(RankPane)
        pane.focus()
        await pilot.press("n", "enter", "up", "ctrl+c", "tab", "f5", "ctrl+o", "x")
        assert app.inputs() == [b"n", b"\r", b"\x1b[A", b"\x03", b"\t", b"x"]
        assert app.marks == ["f5", "ctrl+o"]  # passthrough keys reach the app's bindings
        assert all(m.control is pane and m.rank == 3 for m in app.posted if isinstance(m, RankPane.Input))
        assert pane.has_focus  # tab was typed into the rank, not used to move focus
        pane.feed(b"\x1b[?1h")
        await until(pilot, lambda: pane.terminal.app_cursor, timeout=5)
        await pilot.press("up", "home")
        assert app.inputs()[-2:] == [b"\x1bOA", b"\x1bOH"]


@pytest.mark.asyncio
async def test_paste_is_bracketed_when_the_rank_asks() -> None:
    app = PaneApp()
    async with app.run_test(size=(40, 8)) as pilot:
        pane = app.query_one(RankPane)
        pane.focus()
        pane.post_message(events.Paste("p x\nn\n"))
        await until(pilot, lambda: len(app.inputs()) == 1, timeout=5)
        assert app.inputs() == [b"p x\rn\r"]
        pane.feed(b"\x1b[?2004h")
        await until(pilot, lambda: pane.terminal.bracketed_paste, timeout=5)
        pane.post_message(events.Paste("a\x1b[201~b"))
        await until(pilot, lambda: len(app.inputs()) == 2, timeout=5)
        assert app.inputs()[-1] == b"\x1b[200~ab\x1b[201~"


@pytest.mark.asyncio
async def test_terminal_queries_post_no_input_or_reply() -> None:
    app = PaneApp()
    seen: list[Message] = []  # every message the app processes, not only those it handles
    async with app.run_test(size=(40, 8), message_hook=seen.append) as pilot:
        pane = app.query_one(RankPane)
        pane.feed(b"ab\x1b[c\x1b[6ncd")
        await until(pilot, lambda: rows(pane)[0] == "abcd", timeout=5)
        for _ in range(5):  # a few more frames: a reply would be posted right after emulation
            await pilot.pause(RankPane.FRAME_INTERVAL)
        from_pane = {type(m).__qualname__ for m in seen if type(m).__qualname__.startswith("RankPane.")}
        assert from_pane == {"RankPane.Resized"}
        assert app.inputs() == []
        assert not hasattr(RankPane, "Reply")


@pytest.mark.asyncio
async def test_flood_never_blocks_the_event_loop_and_ends_on_the_last_lines() -> None:
    app = PaneApp()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(RankPane)
        await pilot.pause()
        lines = [b"flood %06d %s\r\n" % (i, b"=" * 30) for i in range(5_000)]
        data = b"".join(lines)  # about 0.15 s of emulation, kept whole (under the 256 KiB cap)
        started = time.monotonic()
        for start in range(0, len(data), 64 * 1024):
            pane.feed(data[start : start + 64 * 1024])
        assert time.monotonic() - started < 0.1  # feeding does no emulation
        busy = []  # CPU seconds the event loop worked between two wake-ups of this probe
        while pane.terminal.pending:
            before = time.thread_time()
            await asyncio.sleep(0.005)
            busy.append(time.thread_time() - before)
        assert max(busy) < 0.1  # frames emulate within their budget, never 0.15 s in one go...
        assert pane.terminal.skipped_bytes > len(data) // 2  # ...and skip what cannot show
        await pilot.pause()
        expected = [line.decode().rstrip() for line in lines[-pane.size.height + 1 :]]
        assert rows(pane)[: len(expected)] == expected


async def test_keys_hold_back_flood_repaints_but_not_for_long() -> None:
    """While keys come in (the app calls `key_pressed` for each), a flooding pane repaints at
    most about every `KEY_QUIET_MAX` seconds, so the keys' echo is drawn first; once the keys
    stop, it repaints every `FLOOD_REPAINT` again."""
    app = PaneApp()
    async with app.run_test(size=(60, 12)) as pilot:
        pane = app.query_one(RankPane)
        await pilot.pause()
        chunk = b"".join(b"flood %06d %s\r\n" % (i, b"=" * 30) for i in range(400))

        async def repaints(seconds: float, typing: bool) -> int:
            seen, count, end = TURNS.last_flood_repaint, 0, time.monotonic() + seconds
            while time.monotonic() < end:
                pane.feed(chunk)  # always more than a frame emulates: the pane stays flooding
                if typing:
                    TURNS.key_pressed()
                await pilot.pause(0.02)
                if TURNS.last_flood_repaint != seen:
                    seen, count = TURNS.last_flood_repaint, count + 1
            return count

        await repaints(0.5, typing=False)
        typing, resting = await repaints(2.0, typing=True), await repaints(2.0, typing=False)
        assert 1 <= typing <= 2.0 / TURNS.KEY_QUIET_MAX + 1, (typing, resting)
        assert resting >= 8, (typing, resting)


class FourFloods(App[None]):
    """Four panes whose ranks flood."""

    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        for rank in range(4):
            yield RankPane(rank)


async def test_floods_that_ended_are_shown_whole_while_keys_keep_coming() -> None:
    """Keys hold flood repaints back, but not a pane whose rank stopped printing: four panes show
    their floods' last lines soon after the floods end, though keys still come (when keys held
    every pane alike, one repainted each `KEY_QUIET_MAX`, and the last showed its end 2 s late)."""
    app = FourFloods()
    async with app.run_test(size=(120, 24)) as pilot:
        panes = list(app.query(RankPane))
        await pilot.pause()
        for round in range(25):  # half a second of flood in every pane, keys coming all along
            for pane in panes:
                pane.feed(
                    b"".join(
                        b"flood %d %06d %s\r\n" % (pane.rank, round * 400 + i, b"=" * 30) for i in range(400)
                    )
                )
            TURNS.key_pressed()
            await pilot.pause(0.02)
        last = [f"flood {pane.rank} {25 * 400 - 1:06d} {'=' * 30}" for pane in panes]

        def shown() -> bool:
            return all(text in rows(pane) for text, pane in zip(last, panes, strict=True))

        end = time.monotonic() + 0.8
        while time.monotonic() < end and not shown():
            TURNS.key_pressed()
            await pilot.pause(0.02)
        assert shown(), [rows(pane)[-3:] for pane in panes]


class FloodAndCalm(App[None]):
    """A flooding pane beside one whose rank prints a few lines at a time."""

    CSS_PATH = TCSS

    def compose(self) -> ComposeResult:
        yield RankPane(0, id="flooding")
        yield RankPane(1, id="calm")


async def test_keys_during_a_flood_hold_back_every_pane_scroll_not_only_the_floods() -> None:
    """A pane that keeps up with its rank (a few lines a frame) still redraws whole when it
    scrolls: while keys come during a flood, those repaints wait too (each took 3-4 ms of a
    screen update the key's echo waited for), and what they held is drawn once keys stop."""
    app = FloodAndCalm()
    async with app.run_test(size=(120, 14)) as pilot:
        flooding, calm = app.query_one("#flooding", RankPane), app.query_one("#calm", RankPane)
        await pilot.pause()
        refresh, whole = calm.refresh, [0]

        def counted(*regions: object, **kwargs: object) -> object:
            whole[0] += not regions
            return refresh(*regions, **kwargs)  # type: ignore[arg-type]

        calm.refresh = counted  # type: ignore[method-assign]
        flood = b"".join(b"flood %06d %s\r\n" % (i, b"=" * 30) for i in range(400))
        line = 0

        async def scrolls(seconds: float, typing: bool) -> int:
            nonlocal line
            whole[0], end = 0, time.monotonic() + seconds
            while time.monotonic() < end:
                flooding.feed(flood)
                calm.feed(b"".join(b"calm line %d\r\n" % (line + i) for i in range(20)))
                line += 20
                if typing:
                    TURNS.key_pressed()
                await pilot.pause(0.02)
            return whole[0]

        await scrolls(0.5, typing=False)
        typing, resting = await scrolls(2.0, typing=True), await scrolls(1.0, typing=False)
        assert typing <= 2.0 / TURNS.KEY_QUIET_MAX + 1, (typing, resting)
        assert resting >= 8, (typing, resting)
        await until(pilot, lambda: f"calm line {line - 1}" in rows(calm))
