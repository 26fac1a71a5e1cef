"""Read a faulthandler dump and say where a blocked rank waits: `train.py:30 in all_reduce`."""

from __future__ import annotations

import os
import re

from ddptui.rank.paths import creates_store, is_library
from ddptui.rank.protocol import Frame

__all__ = [
    "Frame",
    "blocked_at",
    "callee_name",
    "is_library",
    "joining_store",
    "main_thread",
    "parse_threads",
]

_FRAME = re.compile(r'^\s+File "(?P<file>.*)", line (?P<line>\d+) in (?P<func>.*)$')
_THREAD = re.compile(r"^(Current thread|Thread) 0x[0-9a-f]+")
_DDPTUI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_DEBUGGER_FILES = ("/bdb.py", "/pdb.py", "/cmd.py")
"""A rank busy inside a debugger command waits in the debugger's frames, which are never the callee."""
_COLLECTIVE_FILES = ("distributed_c10d.py", "_functional_collectives.py")
"""torch's collectives: the one blocked in is named by its own function there."""
_WRAPPERS = {"wrapper", "inner", "_fn", "decorate_context", "_wrapped_call_impl", "_call_impl"}


def parse_threads(dump: str) -> list[list[Frame]]:
    """Split a faulthandler dump into threads, each a list of frames innermost first."""
    threads: list[list[Frame]] = []
    for text_line in dump.splitlines():
        if _THREAD.match(text_line):
            threads.append([])
        elif (match := _FRAME.match(text_line)) and threads:
            threads[-1].append(Frame(match["file"], int(match["line"]), match["func"]))
    return threads


def main_thread(threads: list[list[Frame]]) -> list[Frame]:
    """The thread running the user's script: the one whose outermost frame is the launcher."""
    for frames in threads:
        if frames and (frames[-1].file.startswith(("<frozen runpy", _DDPTUI_DIR))):
            return frames
    return threads[0] if threads else []


def blocked_at(frames: list[Frame]) -> tuple[Frame | None, str | None]:
    """The innermost user frame of a stack (innermost first), and the library call it waits in."""
    for index, frame in enumerate(frames):
        if not is_library(frame.file):
            return frame, callee_name(frames[:index])
    return None, (frames[0].func if frames else None)


def joining_store(frames: list[Frame]) -> bool:
    """True when a stack (innermost first) stands in the creation of torch's rendezvous store: a
    client retrying its connect, or the store's host waiting for the clients."""
    return bool(frames) and creates_store(frames[0].file, frames[0].func)


def callee_name(callees: list[Frame]) -> str | None:
    """Name the call a user frame is blocked in: the collective itself, not a decorator around it
    (a functional collective, as DTensor's: `wait_tensor`, not the dispatch that led to it)."""
    for frame in callees:
        if frame.file.endswith(_COLLECTIVE_FILES) and frame.func not in _WRAPPERS:
            return frame.func
    ours = [frame for frame in callees if not frame.file.endswith(_DEBUGGER_FILES)]
    for frame in reversed(ours):
        if frame.func not in _WRAPPERS:
            return frame.func
    return ours[0].func if ours else None
