"""TermScreen against real pyte: colours, progress bars, scrollback, floods, hostile bytes."""

from __future__ import annotations

import contextlib
import random
import subprocess
import sys

import pyte
import pytest

from ddptui.term.runs import cells_to_runs, snapshot
from ddptui.term.screen import DEFAULT_ATTR, Attr, TermScreen


def drain(screen: TermScreen, budget: int = 256 * 1024) -> None:
    """Emulate everything pending."""
    screen.process(budget)
    while screen.pending:
        screen.process(budget)


def fed(data: bytes, columns: int = 80, lines: int = 24, **kwargs: int) -> TermScreen:
    """A screen that has emulated `data`."""
    screen = TermScreen(columns, lines, **kwargs)
    screen.feed(data)
    drain(screen)
    return screen


def test_feed_does_no_emulation_until_process() -> None:
    screen = TermScreen(80, 24)
    screen.feed(b"hello\r\n")
    assert screen.pending == 7
    assert screen.text() == ""
    assert screen.process() is True
    assert screen.pending == 0
    assert screen.text() == "hello"


def test_colours_and_attributes_become_runs() -> None:
    screen = fed(b"plain \x1b[1;31mbold red\x1b[0m \x1b[42mon green\x1b[0m \x1b[38;2;255;0;255mpink\x1b[m")
    runs = screen.line_runs(0)
    assert [text for text, _ in runs] == ["plain ", "bold red", " ", "on green", " ", "pink"]
    assert runs[0][1] == DEFAULT_ATTR
    assert runs[1][1] == Attr(fg="red", bold=True)
    assert runs[3][1] == Attr(bg="green")
    assert runs[5][1] == Attr(fg="ff00ff")


def test_one_run_per_span_of_equal_attributes() -> None:
    screen = fed(b"\x1b[34m" + b"x" * 70 + b"\x1b[0m")
    assert screen.line_runs(0) == [("x" * 70, Attr(fg="blue"))]


def test_carriage_return_progress_bar_shows_final_state_only() -> None:
    bar = b"".join(b"\r%3d%%|%-10s|" % (p, b"#" * (p // 10)) for p in range(0, 101, 10))
    screen = fed(bar + b"\r\ndone\r\n")
    assert screen.text() == "100%|##########|\ndone"


def test_long_line_wraps_at_the_right_margin_like_a_terminal() -> None:
    screen = fed(b"a" * 100 + b"\r\n", columns=80)
    assert screen.text() == "a" * 80 + "\n" + "a" * 20
    assert all(len(text) <= 80 for text, _ in screen.line_runs(0))


def test_scrollback_keeps_lines_that_left_the_screen() -> None:
    screen = fed(b"".join(b"line %d\r\n" % i for i in range(100)), lines=10)
    assert screen.total_lines == 91 + 10
    assert screen.text().splitlines()[0] == "line 91"
    assert screen.scroll(1000) is True
    assert screen.scroll_offset == 91
    assert screen.text().splitlines()[:2] == ["line 0", "line 1"]
    assert screen.scroll(-5) is True
    assert screen.text().splitlines()[0] == "line 5"
    assert screen.scroll_to_bottom() is True
    assert screen.scroll_offset == 0
    assert screen.tail_text(3) == "line 97\nline 98\nline 99"


def test_scrolled_view_stays_on_its_lines_while_output_arrives() -> None:
    screen = fed(b"".join(b"line %d\r\n" % i for i in range(50)), lines=10)
    screen.scroll(20)
    top = screen.text().splitlines()[0]
    screen.feed(b"more\r\n" * 5)
    drain(screen)
    assert screen.text().splitlines()[0] == top
    assert screen.scroll_offset == 25


def test_history_is_bounded() -> None:
    screen = fed(b"".join(b"%d\r\n" % i for i in range(300)), lines=5, history=50)
    assert screen.total_lines == 55


def test_clear_scrollback_sequence_empties_history_only() -> None:
    screen = fed(b"".join(b"%d\r\n" % i for i in range(30)) + b"keep", lines=5)
    screen.feed(b"\x1b[3J")
    drain(screen)
    assert screen.total_lines == 5
    assert "keep" in screen.text()


def test_split_utf8_across_feeds_and_process_calls() -> None:
    data = "héllo wörld 中文 ✓\r\n".encode()
    screen = TermScreen(80, 24)
    for i in range(len(data)):
        screen.feed(data[i : i + 1])
        screen.process(1)
    assert screen.text() == "héllo wörld 中文 ✓"


def test_wide_characters_take_two_cells_without_placeholders() -> None:
    screen = fed("中文ab\r\n".encode())
    assert screen.line_runs(0) == [("中文ab", DEFAULT_ATTR)]


def test_overwritten_wide_character_leaves_a_blank_not_a_hole() -> None:
    screen = fed("中\rab".encode())
    assert screen.text() == "ab"
    screen = fed("中文\ra\x1b[3Gb".encode())
    assert screen.text() == "a b"


@pytest.mark.parametrize(
    "bad",
    [
        b"\x1b[?1;2r",  # private DECSTBM: pyte raises TypeError
        b"\x1b[?5m",  # private SGR: TypeError
        b"\x1b[5J",  # unknown erase: UnboundLocalError
        b"\x1b[38;5;9999m",  # 256-colour index out of range
        b"\x1b[38;2;999;999;999m",  # oversized true colour
        b"\x1b[?3h",  # DECCOLM would resize us to 132 columns
        b"\x1b[9999;9999H\x1b[9999@",
        b"\x1b#8",  # DECALN fills the screen with E
        b"\x1b]0;title\x07",
        b"\x1b(0\x1b)0\x0e\x0f",
        b"\x1b[99999999999999999999999999999999m",
    ],
)
def test_bad_sequence_does_not_lose_the_rest_of_the_chunk(bad: bytes) -> None:
    screen = fed(bad + b"\x1b[H\x1b[2J\x1b[0mstill here\r\n")
    assert "still here" in screen.text()
    assert screen.columns == 80


def test_unprintable_and_zero_width_characters_do_not_cut_the_line() -> None:
    screen = fed("a\x01b\u200dc \u2764\ufe0f ok e\u0301\r\n".encode())
    assert screen.text() == "abc \u2764 ok \u00e9"


@pytest.mark.parametrize("budget", [256 * 1024, 100])
def test_unterminated_osc_does_not_swallow_the_log(budget: int) -> None:
    log = b"".join(b"log line %d\r\n" % i for i in range(400))
    screen = TermScreen(80, 24)
    screen.feed(b"\x1b]0;" + log + b"last line\r\n")
    drain(screen, budget)
    assert screen.text().endswith("last line")


def test_fuzzed_bytes_never_raise_and_text_renders_afterwards() -> None:
    rng = random.Random(1234)
    nasty = [
        b"\x1b[?1;2r",
        b"\x1b[?5m",
        b"\x1b[5J",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[4h",
        b"\x1b[?7l",
        b"\x1b[?6h",
        b"\x1b[3;1r",
        b"\x1b]",
        b"\x9b",
        b"\x1b[?25l",
        b"\x1b[?5h",
        b"\xe4\xb8",
        b"\x1b[38;2;1m",
    ]
    screen = TermScreen(40, 10, history=100)
    for _ in range(300):
        chunk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        screen.feed(chunk + rng.choice(nasty) + b"ok\r\n")
        screen.process(rng.randrange(1, 2048))
        screen.resize(rng.randrange(1, 60), rng.randrange(1, 20)) if rng.random() < 0.05 else None
        screen.scroll(rng.randrange(-5, 6))
        cursor = screen.cursor
        assert 0 <= cursor.x < screen.columns and 0 <= cursor.y < screen.lines
        for y in range(screen.lines):
            screen.line_runs(y)
        screen.text()
    drain(screen)
    screen.resize(40, 10)
    screen.feed(b"\x07\x18\x1b\\\x1bcafter the storm\r\n")
    drain(screen)
    screen.scroll_to_bottom()
    assert screen.text() == "after the storm"


def test_resize_keeps_the_cursor_line_and_pushes_lines_above_to_history() -> None:
    screen = fed(b"".join(b"line %d\r\n" % i for i in range(20)) + b"prompt> ", lines=24)
    screen.resize(30, 5)
    assert (screen.columns, screen.lines) == (30, 5)
    assert screen.text().splitlines()[-1] == "prompt>"
    assert screen.cursor.y == 4
    assert screen.total_lines == 16 + 5
    screen.scroll(100)
    assert screen.text().splitlines()[0] == "line 0"


def test_shrinking_width_cuts_lines() -> None:
    screen = fed(b"x" * 100, columns=120)
    screen.resize(40, 24)
    assert screen.text() == "x" * 40
    screen.resize(120, 24)
    screen.feed(b"\ryy")
    drain(screen)
    assert screen.text() == "yy" + "x" * 38


def test_flood_with_budget_keeps_the_last_lines_right() -> None:
    lines = [b"rank0 step %07d loss=%.6f\r\n" % (i, i / 7) for i in range(300_000)]
    data = b"".join(lines)
    assert len(data) >= 8 * 1024 * 1024
    screen = TermScreen(80, 24)
    for start in range(0, len(data), 64 * 1024):
        screen.feed(data[start : start + 64 * 1024])
        screen.process(4096)  # the UI falls far behind
    drain(screen, 64 * 1024)
    expected = b"".join(lines[-23:]).decode().replace("\r\n", "\n").rstrip("\n")
    assert screen.tail_text(23) == expected
    assert screen.skipped_bytes > 6 * 1024 * 1024


def test_skipped_marker_lands_in_scrollback_before_the_tail() -> None:
    screen = TermScreen(80, 5, max_pending=4096, keep=1024)
    screen.feed(b"".join(b"old %d\r\n" % i for i in range(1000)))
    drain(screen)
    screen.scroll(10_000)
    history = []
    while True:
        history.append(screen.text().splitlines()[0])
        if not screen.scroll(-1):
            break
    assert any("output skipped]" in line for line in history)
    assert screen.tail_text(1) == "old 999"


def test_modes_reported_for_keys_and_paste() -> None:
    screen = fed(b"\x1b[?1h\x1b[?2004h")
    assert screen.app_cursor and screen.bracketed_paste
    screen.feed(b"\x1b[?1l\x1b[?2004l")
    drain(screen)
    assert not screen.app_cursor and not screen.bracketed_paste


def test_cursor_position_and_visibility() -> None:
    screen = fed(b"ab\r\ncd")
    assert tuple(screen.cursor) == (2, 1, False)
    screen.feed(b"\x1b[?25l")
    drain(screen)
    assert screen.cursor.hidden


def test_alternate_screen_restores_the_main_screen() -> None:
    screen = fed(b"main text\r\n$ ")
    screen.feed(b"\x1b[?1049h\x1b[H\x1b[2Jpager page\x1b[?1049l")
    drain(screen)
    assert screen.text() == "main text\n$"
    assert screen.cursor.x == 2


def test_terminal_queries_are_swallowed_not_answered() -> None:
    screen = fed(b"abc\x1b[6n\x1b[c\x1b[>c\x1b[5ndef")
    assert screen.text() == "abcdef"
    assert not hasattr(screen, "take_replies")  # no answer may reach the rank's pdb as typed text


def test_dirty_rows_track_changes() -> None:
    screen = fed(b"one\r\ntwo")
    screen.dirty.clear()
    screen.feed(b"\r\x1b[Kthree")
    drain(screen)
    assert screen.dirty == {1}
    screen.dirty.clear()
    assert screen.process() is False
    screen.scroll(0)
    assert not screen.dirty


def test_term_layer_does_not_import_the_ui() -> None:
    code = (
        "import sys, ddptui.term.screen, ddptui.term.keys; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'textual', 'rich'}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _token(rng: random.Random) -> bytes:
    """One piece of realistic terminal output: text, a control, or a CSI/ESC sequence pyte knows."""
    kind = rng.randrange(10)
    if kind < 3:
        return rng.choice([b"hello", b"loss=0.25", b"(Pdb) ", b"x" * rng.randrange(1, 40), b" ", b"-> a = 1"])
    if kind == 3:
        return rng.choice(["é", "✓", "█▌", "中文", "e\u0301", "ab中"]).encode()
    if kind == 4:
        return rng.choice(
            [b"\r", b"\n", b"\r\n", b"\b", b"\t", b"\x1b7", b"\x1b8", b"\x1bD", b"\x1bM", b"\x1bE"]
        )
    if kind == 5:
        colour = rng.randrange(256)
        rgb = [rng.randrange(256) for _ in range(3)]
        plain = [[], [0], [1], [4, 31], [rng.randrange(30, 48)], [rng.randrange(90, 108)], [7], [27]]
        params = rng.choice([*plain, [22, 39, 49], [38, 5, colour], [48, 2, *rgb]])
        return b"\x1b[" + b";".join(b"%d" % p for p in params) + b"m"
    final = rng.choice(b"ABCDEFGHJKLMPX@`dfr")
    count = rng.choice([b"", b"%d" % rng.randrange(0, 30)])
    if final in b"Hfr" and rng.random() < 0.5:  # stock pyte raises on a second parameter elsewhere
        count = b"%d;%d" % (rng.randrange(1, 30), rng.randrange(1, 90))
    if final in b"JK":
        count = b"%d" % rng.randrange(3)
    mode = rng.choice(
        [b"", b"", b"", b"\x1b[?7l", b"\x1b[?7h", b"\x1b[4h", b"\x1b[4l", b"\x1b[?25l", b"\x1b[?6h"]
    )
    return mode + b"\x1b[" + count + bytes([final])


@pytest.mark.parametrize("size", [(80, 24), (20, 6)])
def test_fast_paths_match_stock_pyte(size: tuple[int, int]) -> None:
    """The fast draw and direct CSI dispatch leave exactly the screen stock pyte leaves."""
    rng = random.Random(size[0])
    columns, lines = size
    for _ in range(150):
        tokens = [_token(rng) for _ in range(rng.randrange(1, 120))]
        data = b"".join(tokens)
        stock = pyte.Screen(columns, lines)
        stream = pyte.ByteStream(stock)
        for token in tokens:
            with contextlib.suppress(TypeError, AssertionError):  # stock pyte raises on some
                stream.feed(token)
        ours = TermScreen(columns, lines, history=0)
        for start in range(0, len(data), 7):  # odd chunks: sequences split across process calls
            ours.feed(data[start : start + 7])
            ours.process(5)
        drain(ours)
        expected = [list(cells_to_runs(snapshot(stock.buffer.get(y), columns))) for y in range(lines)]
        assert [ours.line_runs(y) for y in range(lines)] == expected, data
        assert tuple(ours.cursor)[1:] == (stock.cursor.y, stock.cursor.hidden), data
        assert ours.cursor.x == min(stock.cursor.x, columns - 1), data


def test_prefixed_and_colon_csi_sequences_are_ignored_not_misread() -> None:
    screen = fed(b"\x1b[>4;1mplain \x1b[38:2::255:0:0mstill plain\x1b[2 q \x1b[?2026$p.")
    assert screen.line_runs(0) == [("plain still plain .", DEFAULT_ATTR)]
