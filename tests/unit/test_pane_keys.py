"""What a pane leaves in its rank's line: the keys a broadcast must clear first."""

from __future__ import annotations

import pytest

from ddptui.core.session.keys import line_left


@pytest.mark.parametrize(
    ("typed", "data", "left"),
    [
        (b"", b"p ou", b"p ou"),
        (b"p ou", b"t", b"p out"),
        (b"p out", b"\r", b""),  # Enter runs it: nothing left
        (b"", b"p x\rp y", b"p y"),  # a paste: what follows its last line end
        (b"p x", b"\x15", b""),  # ^U erases the line
        (b"p x", b"\x03", b""),  # ^C drops it
        (b"", b"\x1b[A", b"\x1b[A"),  # Up: readline's recalled line is left, though no key reads as text
        (b"p xx", b"\x7f", b"p xx\x7f"),  # a rub-out is a key of the line (`abandon` applies it)
    ],
)
def test_line_left(typed: bytes, data: bytes, left: bytes) -> None:
    assert line_left(typed, data) == left
