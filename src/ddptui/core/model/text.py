"""Terminal bytes to plain text lines, for batch transcripts (the app uses pyte instead)."""

from __future__ import annotations

import re

# Each sequence is matched in its 7-bit form (ESC + letter) and its 8-bit C1 form (U+0090..U+009F):
# terminals that decode UTF-8 act on both, so a rank can move the cursor with U+009B as with ESC [.
# A string sequence (OSC, DCS...) left unterminated ends at the newline, so a stray introducer costs
# the rest of one line of the transcript, not every line after it.
_ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c\n]*(?:\x07|\x1b\\|\x9c)?"  # OSC
    r"|(?:\x1b[PX^_]|[\x90\x98\x9e\x9f])[^\x1b\x9c\n]*(?:\x1b\\|\x9c)?"  # DCS, SOS, PM, APC
    r"|\x1b[ -/]*[0-~]?"  # other escapes
    r"|[\x00-\x07\x0b\x0c\x0e-\x1f\x7f-\x9f]"  # other controls, C1 too (keeps \b \t \n \r)
)

# What a terminal may act on (C0 but \t and \n, DEL, C1), and lone surrogates, which no strict
# UTF-8 stream can encode: printing one would raise instead of showing it.
_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    """`\\x1b` for a control character, `\\udc80` for a lone surrogate."""
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def inert(text: str) -> str:
    """Text from a rank made safe to print to the user's terminal, losing nothing.

    Every character a terminal could act on (C0 controls but tab and newline, DEL, C1 controls
    such as U+009B CSI and U+009D OSC) is shown as its escape, `\\x1b`, `\\x9b`, `\\x07`: an
    OSC 52 or a title change from a rank then reads as text instead of reaching the clipboard
    or the title. A backslash already in the text is left alone, so this is for reading, not
    for reversing. U+FFFD (what undecodable bytes become) prints as is.
    """
    return _UNSAFE.sub(_visible, text)


def one_line(text: str) -> str:
    """`inert` text on one line: newlines and tabs shown as `\\n` and `\\t` (a command line can
    hold them, as in `python -c $'import time\\ntime.sleep(60)'`)."""
    return inert(text).replace("\n", "\\n").replace("\t", "\\t")


def strip_escapes(text: str) -> str:
    """Remove escape sequences (7-bit and C1) and stray control characters."""
    return _ESCAPE.sub("", text)


def overwrite(line: str) -> str:
    """Apply carriage returns and backspaces the way a terminal would to one line."""
    line = line.rstrip("\r")  # a return at the end moves nothing (a pty ends every line with one)
    if "\r" not in line and "\b" not in line:
        return line  # nearly every line: no character is overwritten
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
    """The lines a terminal would show for `data` (no trailing empty line), safe to print.

    Escape sequences are dropped rather than shown, as a terminal would not show them; `inert`
    then guarantees that nothing a terminal acts on survives, whatever the patterns missed.
    """
    text = strip_escapes(data.decode("utf-8", "replace")).expandtabs()
    lines = [inert(overwrite(line).rstrip()) for line in text.split("\n")]
    if lines and not lines[-1]:
        lines.pop()
    return lines
