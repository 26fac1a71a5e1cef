"""Which frames of a rank's stack are the user's: ddptui's launcher and runpy are hidden from
`where`, a traceback and the stack shown; `location` says where a frame stands. Standard library only."""

from __future__ import annotations

import os
import types

from ddptui.rank.protocol import Frame

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))

_hidden_files: dict[str, bool] = {}


def is_hidden(frame: types.FrameType) -> bool:
    """True for frames of runpy and of ddptui's rank bootstrap, which `where` should not show.

    Asked on every line event while stepping: the answer is kept per file.
    """
    filename = frame.f_code.co_filename
    hidden = _hidden_files.get(filename)
    if hidden is None:
        hidden = (
            filename.startswith(("<frozen runpy", _PACKAGE_DIR)) or os.path.basename(filename) == "runpy.py"
        )
        _hidden_files[filename] = hidden
    return hidden


_user_top: types.FrameType | None = None
"""The outermost frame of the user's code, under the launcher's frames (found at the first stop)."""


def user_top() -> types.FrameType | None:
    """The outermost frame of the user's code, once `find_user_top` found it."""
    return _user_top


def find_user_top(stack: list[tuple[types.FrameType, int]]) -> None:
    """Remember the outermost user frame of a whole stack (outermost first) whose top is the launcher."""
    global _user_top
    if not stack or stack[0][0].f_back is not None or not is_hidden(stack[0][0]):
        return
    for frame, _ in stack:
        if not is_hidden(frame):
            _user_top = frame
            return


def trim_traceback(tb: types.TracebackType | None) -> types.TracebackType | None:
    """Drop the leading runpy/ddptui entries of a traceback; None when no user frame is left."""
    while tb is not None and is_hidden(tb.tb_frame):
        tb = tb.tb_next
    return tb


def location(frame: types.FrameType) -> Frame:
    """The file, line and function of a frame (line 0 where the frame has none: Python gives
    None at some instructions, as in torch's import machinery)."""
    code = frame.f_code
    return Frame(code.co_filename, frame.f_lineno or 0, code.co_name)
