"""Every way a debugger opens in a rank leads to `RankPdb`: `breakpoint()`, `pdb.Pdb`, `ipdb`,
Ctrl-C (SIGINT) while the program runs, and a crash's post-mortem. Standard library only."""

from __future__ import annotations

import os
import pdb
import signal
import sys
import threading
import types
from typing import Any

from ddptui.rank import debugger
from ddptui.rank.debugger import RankPdb
from ddptui.rank.hooks import when_imported


def breakpointhook(*args: Any, **kwargs: Any) -> None:
    """`sys.breakpointhook`: `breakpoint()` opens a `RankPdb` (PYTHONBREAKPOINT=0 still disables)."""
    if os.environ.get("PYTHONBREAKPOINT") == "0":
        return
    RankPdb().set_trace(sys._getframe().f_back)


def _patch_ipdb(module: types.ModuleType) -> None:
    """Point `ipdb.set_trace` & co. at RankPdb: IPython's prompt is not pdb's, and one debugger
    everywhere keeps the side channel truthful."""
    module.set_trace = lambda frame=None, **_: RankPdb().set_trace(  # type: ignore[attr-defined]
        frame or sys._getframe().f_back
    )
    module.post_mortem = lambda tb=None: pdb.post_mortem(tb)  # type: ignore[attr-defined]
    module.pm = pdb.pm  # type: ignore[attr-defined]


_rank_pid = 0
"""The rank's process (set by `install`): one forked from it, a DataLoader worker, is not the rank."""


def on_interrupt(signum: int, frame: types.FrameType | None) -> None:
    """SIGINT while the program runs (`:interrupt`, or Ctrl-C typed in the rank's pane): pdb opens
    at the next line of the user's code, as under `python -m pdb`. At a prompt, once detached, and
    in a process forked from the rank, it is a KeyboardInterrupt as usual."""
    if debugger.detached or debugger.active is not None or frame is None or os.getpid() != _rank_pid:
        raise KeyboardInterrupt
    RankPdb().sigint_handler(signum, frame)


def install() -> None:
    """Route every way of opening a debugger in this process to `RankPdb`; Ctrl-C opens one too,
    unless the program already handles or ignores SIGINT."""
    global _rank_pid
    pdb.Pdb = RankPdb  # type: ignore[misc]
    sys.breakpointhook = breakpointhook
    when_imported("ipdb", _patch_ipdb)
    _rank_pid = os.getpid()
    main = threading.current_thread() is threading.main_thread()
    if main and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, on_interrupt)


def post_mortem(tb: types.TracebackType) -> None:
    """Open a post-mortem prompt at the frame that raised (none once detached)."""
    if debugger.detached:
        return
    opened = RankPdb()
    opened.reset()
    opened.interaction(None, tb)
