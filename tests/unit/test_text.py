"""Terminal bytes to transcript lines."""

import pytest

from ddptui.core.model.text import inert, overwrite, terminal_lines


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


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("", ""),
        ("plain", "plain"),
        ("ends\r", "ends"),
        ("ends\r\r", "ends"),
        ("\r", ""),
        ("10%\r20%", "20%"),
        ("10%\r20%\r", "20%"),
        ("long\rab", "abng"),
        ("ab\bX", "aX"),
        ("\b\bx", "x"),
        ("a\rbc\r\bZ", "Zc"),
    ],
)
def test_overwrite_is_what_a_terminal_shows(line: str, shown: str) -> None:
    """Returns and backspaces anywhere in a line, and the shortcut for lines with none inside."""
    assert overwrite(line) == shown


# What a rank may print to reach the user's terminal: clipboard write (OSC 52), title (OSC 0),
# colour (SGR), and the same through 8-bit C1 controls (U+009B CSI, U+009D OSC, U+009C ST).
HOSTILE = [
    "\x1b]52;c;QkFTRTY0\x07",
    "\x1b]0;title\x1b\\",
    "\x1b[31mred\x1b[0m",
    "\x9b31m",
    "\x9d0;title\x9c",
    "\x9d52;c;QkFTRTY0\x07",
    "\x90q\x9c",
]
RAW = ["\x1b", "\x07", "\x9b", "\x9c", "\x9d", "\x90"]


def _unsafe(text: str) -> list[str]:
    """Characters a terminal would act on: C0 but tab and newline, DEL and C1."""
    return [c for c in text if (ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) <= 0x9F]


@pytest.mark.parametrize("sequence", HOSTILE)
def test_inert_shows_every_control_as_text(sequence: str) -> None:
    shown = inert(f"a{sequence}b")
    assert _unsafe(shown) == []
    assert shown.startswith("a") and shown.endswith("b")


def test_inert_spells_controls_as_hex_and_keeps_the_rest() -> None:
    assert inert("\x1b]52;c;QkFTRTY0\x07") == "\\x1b]52;c;QkFTRTY0\\x07"
    assert inert("\x9b31m\x7f\x00\r") == "\\x9b31m\\x7f\\x00\\x0d"
    assert inert("tab\there\nback\\slash \ufffd é 日本") == "tab\there\nback\\slash \ufffd é 日本"


def test_inert_shows_lone_surrogates_so_printing_cannot_fail() -> None:
    shown = inert(b"x\xffy".decode("utf-8", "surrogateescape"))
    assert shown == "x\\udcffy"
    shown.encode("utf-8")


@pytest.mark.parametrize("sequence", HOSTILE)
def test_terminal_lines_never_keep_a_control(sequence: str) -> None:
    lines = terminal_lines(f"before {sequence} after\n".encode())
    assert lines and all(_unsafe(line) == [] for line in lines)
    assert lines[0].startswith("before") and lines[0].endswith("after")


def test_terminal_lines_drop_c1_sequences_whole() -> None:
    data = "\x9b31mred\x9b0m \x9d0;title\x9cok \x9d52;c;QkFTRTY0\x07done\n".encode()
    assert terminal_lines(data) == ["red ok done"]


@pytest.mark.parametrize("control", RAW)
def test_terminal_lines_drop_stray_controls(control: str) -> None:
    # A lone introducer may take what follows as its sequence (as a terminal would), never stay raw.
    lines = terminal_lines(f"a{control} b\nnext\n".encode())
    assert lines[0].startswith("a") and lines[-1] == "next"
    assert all(_unsafe(line) == [] for line in lines)
