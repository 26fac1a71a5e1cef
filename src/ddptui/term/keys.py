"""Encode a key, as Textual names it, into the bytes an xterm would send to the program."""

from __future__ import annotations

import unicodedata

_CSI = "\x1b["
_SS3 = "\x1bO"

_PLAIN: dict[str, bytes] = {
    "enter": b"\r",
    "ctrl+m": b"\r",
    "tab": b"\t",
    "ctrl+i": b"\t",
    "shift+tab": b"\x1b[Z",
    "backspace": b"\x7f",  # what xterm and most terminals send; `stty erase ^?`
    "ctrl+h": b"\x08",
    "ctrl+backspace": b"\x08",
    "escape": b"\x1b",
    "space": b" ",
    "ctrl+j": b"\n",
    "newline": b"\n",
    "ctrl+@": b"\x00",
    "ctrl+at": b"\x00",
    "ctrl+space": b"\x00",
    "ctrl+left_square_bracket": b"\x1b",
    "ctrl+left_square_brace": b"\x1b",
    "ctrl+backslash": b"\x1c",
    "ctrl+right_square_bracket": b"\x1d",
    "ctrl+circumflex_accent": b"\x1e",
    "ctrl+underscore": b"\x1f",
}
"""Keys that send one fixed sequence whatever the mode."""

_CURSOR_FINALS = {"up": "A", "down": "B", "right": "C", "left": "D", "home": "H", "end": "F"}
"""Keys that send `CSI x` normally and `SS3 x` in application cursor mode."""

_SS3_FINALS = {"f1": "P", "f2": "Q", "f3": "R", "f4": "S"}
_TILDE_CODES = {
    "insert": 2,
    "delete": 3,
    "pageup": 5,
    "pagedown": 6,
    "f5": 15,
    "f6": 17,
    "f7": 18,
    "f8": 19,
    "f9": 20,
    "f10": 21,
    "f11": 23,
    "f12": 24,
}
"""Keys that send `CSI n ~`."""

_MODIFIER_BITS = {"shift": 1, "alt": 2, "meta": 2, "ctrl": 4}
_NAMED_CHARACTERS = {"space": " ", "minus": "-", "plus": "+", "slash": "/", "at": "@"}
_CONTROL_NAMES = {
    "@": 0,
    "at": 0,
    "space": 0,
    "left_square_bracket": 27,
    "backslash": 28,
    "right_square_bracket": 29,
    "circumflex_accent": 30,
    "underscore": 31,
    "question_mark": 127,
}


def key_to_bytes(key: str, character: str | None, app_cursor: bool) -> bytes | None:
    """The bytes an xterm sends for `key`, or None when it sends nothing we know of.

    Args:
        key: Textual's key name, such as "up", "ctrl+a", "shift+pageup" or "a".
        character: The character Textual reports for the key, if any.
        app_cursor: Whether the program enabled application cursor keys (DECCKM).
    """
    if key in _PLAIN:
        return _PLAIN[key]
    if len(key) == 1:  # "+" and other characters whose name could not be split
        return _printable(key, character, shifted=False)
    *modifiers, base = key.split("+")
    if not base or any(modifier not in _MODIFIER_BITS for modifier in modifiers):
        return None
    mods = frozenset("alt" if modifier == "meta" else modifier for modifier in modifiers)
    special = _special_key(base, 1 + sum(_MODIFIER_BITS[mod] for mod in mods), app_cursor)
    if special is not None:
        return special.encode()
    if "alt" in mods:
        rest = key_to_bytes("+".join([*sorted(mods - {"alt"}), base]), character, app_cursor)
        return None if rest is None else b"\x1b" + rest
    if base in _PLAIN and mods <= {"shift", "ctrl"}:
        return _PLAIN[base]
    if mods <= {"shift"}:
        return _printable(base, character, shifted=bool(mods))
    return _control(base)


def _special_key(base: str, modifier_param: int, app_cursor: bool) -> str | None:
    """Cursor, editing and function keys, with xterm's `;modifier` parameter when modified."""
    if base in _CURSOR_FINALS:
        final = _CURSOR_FINALS[base]
        if modifier_param == 1:
            return (_SS3 if app_cursor else _CSI) + final
        return f"{_CSI}1;{modifier_param}{final}"
    if base in _SS3_FINALS:
        final = _SS3_FINALS[base]
        return _SS3 + final if modifier_param == 1 else f"{_CSI}1;{modifier_param}{final}"
    if base in _TILDE_CODES:
        code = _TILDE_CODES[base]
        return f"{_CSI}{code}~" if modifier_param == 1 else f"{_CSI}{code};{modifier_param}~"
    return None


def _printable(base: str, character: str | None, shifted: bool) -> bytes | None:
    """A printable key: the character Textual reports, else the one its name stands for."""
    if character and character.isprintable():
        return character.encode("utf-8", "replace")
    if len(base) == 1:
        return (base.upper() if shifted else base).encode("utf-8", "replace")
    named = _NAMED_CHARACTERS.get(base)
    if named is None:
        try:
            named = unicodedata.lookup(base.replace("_", " "))
        except KeyError:
            return None
    return named.encode("utf-8", "replace")


def _control(base: str) -> bytes | None:
    """Ctrl with a letter or one of the symbols that have a control code (ctrl+a is 0x01)."""
    if len(base) == 1 and "a" <= base.lower() <= "z":
        return bytes([ord(base.lower()) & 0x1F])
    code = _CONTROL_NAMES.get(base)
    return None if code is None else bytes([code])
