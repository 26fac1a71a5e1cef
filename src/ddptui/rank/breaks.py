"""Breakpoints from ddptui's command line, set in a rank before its program runs, and the list
`:breaks` asks for.

ddptui checks `--break` up front and passes each one on in `BREAKS_ENV` as pdb's `b` takes it,
its file made absolute: `FILE:LINE[, CONDITION]`, or `FILE:FUNCTION[, CONDITION]` for the first
line of a function. `START_ENV` asks for a stop at the program's first line, as under
`python -m pdb`. `arm` sets them and traces the main thread: a hit opens the rank's prompt as a
`breakpoint()` call does. Standard library only; the debugger is imported when there is
something to arm.
"""

from __future__ import annotations

import bdb
import json
import os
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from ddptui.rank.asks import Breakpoint

BREAKS_ENV = "DDPTUI_BREAKS"
"""Environment variable: the `--break` breakpoints, a JSON list of pdb `b` arguments."""
START_ENV = "DDPTUI_STOP_AT_START"
"""Environment variable: `1` stops every rank at its program's first line (`--stop-at-start`)."""

Start = Callable[[types.FrameType], bool]
"""Tells the frame whose first line is the program's start."""


def given() -> list[str]:
    """The `--break` breakpoints ddptui passed on (none when the variable is missing or not a list)."""
    try:
        found = json.loads(os.environ.get(BREAKS_ENV) or "[]")
    except ValueError:
        return []
    return [spec for spec in found if isinstance(spec, str)] if isinstance(found, list) else []


_armed = False
"""True once `arm` has run in this process (a rank arms once)."""


def main_module(frame: types.FrameType) -> bool:
    """The frame of the `__main__` module: a script's or `-m` module's first line."""
    return frame.f_code.co_name == "<module>" and frame.f_globals.get("__name__") == "__main__"


def wanted() -> bool:
    """True when ddptui asked for breakpoints or a stop at the start."""
    return bool(given()) or os.environ.get(START_ENV) == "1"


def arm(start: Start = main_module) -> None:
    """Set the `--break` breakpoints and trace the main thread so that they stop it; with
    `--stop-at-start`, stop at the first line of the frame `start` picks out."""
    global _armed
    if _armed or not wanted() or threading.current_thread() is not threading.main_thread():
        return
    _armed = True
    from ddptui.rank.debugger import RankPdb

    debugger = RankPdb()
    for spec in given():
        set_break(debugger, spec)
    if os.environ.get(START_ENV) == "1":
        sys.settrace(_starter(start))
    elif debugger.breaks:
        trace_from_here(debugger)


def set_break(debugger: Any, spec: str) -> None:
    """`b SPEC` in `debugger`; `FILE:FUNCTION` (which pdb's `b` does not take) breaks at the
    function's first line, as `b FUNCTION` does. pdb says what it set, or why not."""
    where, _, condition = spec.partition(",")
    file, colon, name = where.strip().rpartition(":")
    if not colon or name.strip().isdigit():
        debugger.do_break(spec)
        return
    import pdb

    found = pdb.find_function(name.strip(), file)
    if found is None:
        debugger.error(f"no function {name.strip()} in {file}")
        return
    function, filename, line = found
    error = debugger.set_break(filename, line, False, condition.strip() or None, function)
    if error:
        debugger.error(error)
        return
    bp = debugger.get_breaks(filename, line)[-1]
    debugger.message(f"Breakpoint {bp.number} at {bp.file}:{bp.line}")


def trace_from_here(debugger: Any) -> None:
    """Trace the main thread from now on, stopping only at breakpoints (as after pdb's `continue`):
    the frames running now, ddptui's launcher, are left untraced."""
    outer = sys._getframe()
    while outer.f_back is not None:
        outer = outer.f_back
    debugger.reset()
    debugger.botframe = outer
    debugger._set_stopinfo(outer, None, -1)
    sys.settrace(debugger.trace_dispatch)


def _starter(start: Start) -> Callable[[types.FrameType, str, Any], Any]:
    """A trace function that waits, cheaply, for the start frame and opens the prompt at its first line."""

    def on_call(frame: types.FrameType, event: str, arg: Any) -> Any:
        return on_first_line if event == "call" and start(frame) else None

    def on_first_line(frame: types.FrameType, event: str, arg: Any) -> Any:
        if event != "line":
            return on_first_line
        from ddptui.rank.debugger import RankPdb

        debugger = RankPdb()
        debugger.stop_at(frame)
        return debugger.trace_dispatch

    return on_call


def listing() -> list[Breakpoint]:
    """`breaks`: this rank's pdb breakpoints, in pdb's order."""
    return [
        Breakpoint(bp.number, bp.file, bp.line, bp.cond, bool(bp.enabled), bool(bp.temporary), bp.hits)
        for bp in bdb.Breakpoint.bpbynumber
        if bp is not None
    ]
