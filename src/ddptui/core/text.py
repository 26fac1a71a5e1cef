"""Terminal bytes to plain text lines, for batch transcripts (the app uses pyte instead)."""

from __future__ import annotations

import re

_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # other escapes
    r"|[\x00-\x07\x0b\x0c\x0e-\x1f\x7f]"  # other controls (keeps \b \t \n \r)
)


def strip_escapes(text: str) -> str:
    """Remove escape sequences and stray control characters."""
    return _ESCAPE.sub("", text)


def overwrite(line: str) -> str:
    """Apply carriage returns and backspaces the way a terminal would to one line."""
    cells: list[str] = []
    col = 0
    for char in line:
        if char == "\r":
            col = 0
        elif char == "\b":
            col = max(col - 1, 0)
        else:
            if col < len(cells):
                cells[col] = char
            else:
                cells.append(char)
            col += 1
    return "".join(cells)


def terminal_lines(data: bytes) -> list[str]:
    """The lines a terminal would show for `data` (no trailing empty line)."""
    text = strip_escapes(data.decode("utf-8", "replace")).expandtabs()
    lines = [overwrite(line).rstrip() for line in text.split("\n")]
    if lines and not lines[-1]:
        lines.pop()
    return lines
