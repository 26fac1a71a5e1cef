"""The error inside a wrapper's message: an exception raised elsewhere, re-raised with its
traceback as text.

torch does this for a DataLoader worker (`Caught ValueError in DataLoader worker process 0.`,
then `Original Traceback (most recent call last):` and the worker's traceback) and for the pin
memory thread. The rank's own traceback ends in torch's `reraise`, and the message's first line
says only that something failed somewhere: the innermost error is the one in the text.
"""

from __future__ import annotations

import re

from ddptui.core.model.state import Frame

_TRACEBACK = re.compile(r"^(?:Original )?Traceback \(most recent call last\):$", re.M)
_FRAME = re.compile(r'^  File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<func>[^\n]+)$', re.M)
_ERROR = re.compile(r"(?P<type>[A-Za-z_][\w.]*)(?:: (?P<message>.*))?\Z", re.S)
_WHERE = re.compile(r"^Caught \S+ (?P<where>in .+?)\.?$")


def innermost(type_: str, message: str, frames: tuple[Frame, ...]) -> tuple[str, str, tuple[Frame, ...]]:
    """The error a message carries as a traceback, if it carries one: its type, its message (with
    where it ran, as the wrapper says: `(in DataLoader worker process 0)`) and the frames, the
    wrapper's first; else the arguments as given."""
    found = list(_TRACEBACK.finditer(message))
    if not found:
        return type_, message, frames
    body = message[found[-1].end() :]  # of chained errors, the last one is the one raised
    inner = list(_FRAME.finditer(body))
    if not inner:
        return type_, message, frames
    rest = body[inner[-1].end() :].split("\n")
    while rest and (not rest[0].strip() or rest[0].startswith("    ")):  # its source and ^^^ lines
        rest.pop(0)
    error = _ERROR.match("\n".join(rest).strip())
    if error is None:
        return type_, message, frames
    text = (error["message"] or "").strip()
    where = _WHERE.match(message[: found[0].start()].strip().split("\n")[0])
    if where is not None:
        first, _, more = text.partition("\n")
        text = f"{first} ({where['where']})".lstrip() + (f"\n{more}" if more else "")
    added = tuple(Frame(m["file"], int(m["line"]), m["func"]) for m in inner)
    return error["type"], text, frames + added
