"""Terminal bytes to transcript lines."""

from ddptui.core.text import terminal_lines


def test_pdb_bytes_become_lines() -> None:
    data = b"n\x1b[?2004l\r\r\n> /x/train.py(5)<module>()\r\n-> y = 2\r\n\x1b[?2004h(Pdb r0) "
    assert terminal_lines(data) == ["n", "> /x/train.py(5)<module>()", "-> y = 2", "(Pdb r0)"]


def test_carriage_return_progress_keeps_the_last_state() -> None:
    assert terminal_lines(b"  10%\r  50%\r100% done\n") == ["100% done"]


def test_colours_osc_and_garbage_are_dropped() -> None:
    data = b"\x1b[31mred\x1b[0m \x1b]0;title\x07ok\x00\x07\xff\n"
    assert terminal_lines(data) == ["red ok\ufffd"]


def test_backspace_overwrites() -> None:
    assert terminal_lines(b"abc\b\bX\n") == ["aXc"]
