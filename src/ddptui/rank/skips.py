"""Breakpoints the user said stop no more (`:skip`), and where this rank last stopped at one.

A hard-coded breakpoint (`breakpoint()`, `set_trace()`) is skipped by its call site; one of pdb's
own (`b`, `--break`) by being disabled, and enabled again by `:skip none`. A site is a file and a
line: the file absolute, or as the user typed it (`train.py`), which names every file whose path
ends with it. Standard library only.
"""

from __future__ import annotations

import bdb
import os
import types

Site = tuple[str, int]
"""A file and a line."""


def same_file(path: str, given: str) -> bool:
    """True when `given` (absolute, or as typed: `train.py`, `scripts/train.py`) names `path`."""
    path = os.path.abspath(path)
    if os.path.isabs(given):
        return path == os.path.normpath(given)
    given = os.path.normpath(given)
    return path == os.path.abspath(given) or path.endswith(os.sep + given)


class Skips:
    """Which breakpoints stop no more, and where this rank last stopped at one."""

    sites: set[Site] = set()
    """Sites whose breakpoints no longer stop."""
    everything = False
    """True after `:skip all`: no hard-coded breakpoint stops."""
    disabled: set[int] = set()
    """Numbers of pdb breakpoints `:skip` disabled (`:skip none` enables them again)."""
    last: Site | None = None
    """The breakpoint this rank last stopped at, its file absolute (bare `:skip` skips it)."""

    @classmethod
    def skips(cls, frame: types.FrameType) -> bool:
        """True when a hard-coded breakpoint called from `frame` should not stop."""
        if cls.everything:
            return True
        line = frame.f_lineno
        return any(line == at and same_file(frame.f_code.co_filename, file) for file, at in cls.sites)

    @classmethod
    def stopped_at(cls, file: str, line: int) -> None:
        """Remember the breakpoint this rank stops at now."""
        cls.last = (os.path.abspath(file), line)

    @classmethod
    def add(cls, sites: tuple[Site, ...]) -> None:
        """Skip `sites`: their calls stop no more, their pdb breakpoints are disabled."""
        cls.sites.update(sites)
        for bp in bdb.Breakpoint.bpbynumber:
            if (
                bp is not None
                and bp.enabled
                and any(bp.line == at and same_file(bp.file, f) for f, at in sites)
            ):
                bp.enabled = False
                cls.disabled.add(bp.number)

    @classmethod
    def forget(cls) -> None:
        """`:skip none`: every breakpoint stops again (the pdb ones `:skip` disabled are enabled)."""
        cls.sites.clear()
        cls.everything = False
        for bp in bdb.Breakpoint.bpbynumber:
            if bp is not None and bp.number in cls.disabled:
                bp.enabled = True
        cls.disabled.clear()
