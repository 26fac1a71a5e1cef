"""key_to_bytes: Textual key names to the bytes an xterm sends."""

from __future__ import annotations

import pytest

from ddptui.term.keys import key_to_bytes


@pytest.mark.parametrize(
    ("key", "character", "expected"),
    [
        ("a", "a", b"a"),
        ("A", "A", b"A"),
        ("shift+a", "A", b"A"),
        ("shift+a", None, b"A"),
        ("space", " ", b" "),
        ("exclamation_mark", "!", b"!"),
        ("exclamation_mark", None, b"!"),
        ("plus", "+", b"+"),
        ("eacute", "\u00e9", "\u00e9".encode()),
        ("enter", "\r", b"\r"),
        ("shift+enter", None, b"\r"),
        ("tab", "\t", b"\t"),
        ("shift+tab", None, b"\x1b[Z"),
        ("backspace", "\x7f", b"\x7f"),
        ("escape", "\x1b", b"\x1b"),
        ("ctrl+a", "\x01", b"\x01"),
        ("ctrl+a", None, b"\x01"),
        ("ctrl+c", None, b"\x03"),
        ("ctrl+d", None, b"\x04"),
        ("ctrl+z", None, b"\x1a"),
        ("ctrl+shift+a", None, b"\x01"),
        ("ctrl+j", None, b"\n"),
        ("ctrl+at", None, b"\x00"),
        ("ctrl+backslash", None, b"\x1c"),
        ("ctrl+right_square_bracket", None, b"\x1d"),
        ("ctrl+underscore", None, b"\x1f"),
        ("alt+b", "b", b"\x1bb"),
        ("alt+shift+b", "B", b"\x1bB"),
        ("alt+backspace", None, b"\x1b\x7f"),
        ("alt+ctrl+a", None, b"\x1b\x01"),
        ("up", None, b"\x1b[A"),
        ("down", None, b"\x1b[B"),
        ("right", None, b"\x1b[C"),
        ("left", None, b"\x1b[D"),
        ("home", None, b"\x1b[H"),
        ("end", None, b"\x1b[F"),
        ("insert", None, b"\x1b[2~"),
        ("delete", None, b"\x1b[3~"),
        ("pageup", None, b"\x1b[5~"),
        ("pagedown", None, b"\x1b[6~"),
        ("ctrl+left", None, b"\x1b[1;5D"),
        ("shift+up", None, b"\x1b[1;2A"),
        ("alt+right", None, b"\x1b[1;3C"),
        ("ctrl+shift+end", None, b"\x1b[1;6F"),
        ("shift+pageup", None, b"\x1b[5;2~"),
        ("ctrl+delete", None, b"\x1b[3;5~"),
        ("f1", None, b"\x1bOP"),
        ("f4", None, b"\x1bOS"),
        ("f5", None, b"\x1b[15~"),
        ("f6", None, b"\x1b[17~"),
        ("f10", None, b"\x1b[21~"),
        ("f11", None, b"\x1b[23~"),
        ("f12", None, b"\x1b[24~"),
        ("ctrl+f1", None, b"\x1b[1;5P"),
        ("shift+f5", None, b"\x1b[15;2~"),
        ("ctrl+1", None, None),
        ("super+a", None, None),
        ("unknown_key_name", None, None),
    ],
)
def test_key_to_bytes(key: str, character: str | None, expected: bytes | None) -> None:
    assert key_to_bytes(key, character, app_cursor=False) == expected


@pytest.mark.parametrize(
    ("key", "normal", "application"),
    [
        ("up", b"\x1b[A", b"\x1bOA"),
        ("down", b"\x1b[B", b"\x1bOB"),
        ("right", b"\x1b[C", b"\x1bOC"),
        ("left", b"\x1b[D", b"\x1bOD"),
        ("home", b"\x1b[H", b"\x1bOH"),
        ("end", b"\x1b[F", b"\x1bOF"),
        ("ctrl+up", b"\x1b[1;5A", b"\x1b[1;5A"),  # modified keys ignore DECCKM
        ("pageup", b"\x1b[5~", b"\x1b[5~"),
        ("a", b"a", b"a"),
    ],
)
def test_application_cursor_mode(key: str, normal: bytes, application: bytes) -> None:
    character = key if len(key) == 1 else None
    assert key_to_bytes(key, character, app_cursor=False) == normal
    assert key_to_bytes(key, character, app_cursor=True) == application
