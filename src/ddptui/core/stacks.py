"""Read a faulthandler dump and say where a blocked rank waits: `train.py:30 in all_reduce`."""

from __future__ import annotations

import os
import re
import sysconfig
from dataclasses import dataclass

from ddptui.core.state import Location

_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.*)$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")
_LIBRARY_DIRS = tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})
_DDPTUI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_WRAPPERS = {"wrapper", "inner", "_fn", "decorate_context", "_wrapped_call_impl", "_call_impl"}


@dataclass(frozen=True)
class Frame:
    """One frame of a stack dump."""

    file: str
    line: int
    func: str


def parse_threads(dump: str) -> list[list[Frame]]:
    """Split a faulthandler dump into threads, each a list of frames innermost first."""
    threads: list[list[Frame]] = []
    for text_line in dump.splitlines():
        if _THREAD.match(text_line):
            threads.append([])
        elif (match := _FRAME.match(text_line)) and threads:
            threads[-1].append(Frame(match["file"], int(match["line"]), match["func"]))
    return threads


def is_library(path: str) -> bool:
    """True for frames outside the user's code: stdlib, site-packages, frozen modules, ddptui."""
    return (
        path.startswith(("<", _DDPTUI_DIR))
        or path.startswith(_LIBRARY_DIRS)
        or "/site-packages/" in path
        or "/dist-packages/" in path
    )


def main_thread(threads: list[list[Frame]]) -> list[Frame]:
    """The thread running the user's script: the one whose outermost frame is the launcher."""
    for frames in threads:
        if frames and (frames[-1].file.startswith(("<frozen runpy", _DDPTUI_DIR))):
            return frames
    return threads[0] if threads else []


def waiting_point(dump: str) -> tuple[Location | None, str | None]:
    """The innermost user frame of the main thread, and the library call it waits in."""
    frames = main_thread(parse_threads(dump))
    for index, frame in enumerate(frames):
        if not is_library(frame.file):
            return Location(frame.file, frame.line, frame.func), callee_name(frames[:index])
    return None, (frames[0].func if frames else None)


def callee_name(callees: list[Frame]) -> str | None:
    """Name the call a user frame is blocked in: the collective itself, not a decorator around it."""
    for frame in callees:
        if frame.file.endswith("distributed_c10d.py") and frame.func not in _WRAPPERS:
            return frame.func
    for frame in reversed(callees):
        if frame.func not in _WRAPPERS:
            return frame.func
    return callees[0].func if callees else None
