"""Python's multiprocessing temporary folder (`pymp-*`) told to ddptui, which removes it.

`multiprocessing.util.get_temp_dir()` (DataLoader workers sharing tensors, managers, listeners)
makes a `pymp-*` folder in TMPDIR that only a finalizer at a normal exit removes: every rank
ddptui ended by a signal left one. The rank writes the folder's path into the session's state
folder as soon as it is made; the core removes the folders listed there once the ranks are gone
(`core.transport.ending.remove_tempdirs`), so no folder another process may own is ever touched.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from ddptui.rank.hooks import when_imported

LISTING = "tempdirs-"
"""Start of the name of the files, one per process, that list the folders made (`tempdirs-PID.txt`)."""


def record_in(state_dir: str) -> None:
    """Have every folder `get_temp_dir` makes in this process (and its forks) listed in `state_dir`.

    Hooked on import: importing multiprocessing at start-up would alias `__mp_main__` to ddptui's
    own main module, before the user's script is `__main__`.
    """
    when_imported("multiprocessing.util", functools.partial(_record, state_dir))


def _record(state_dir: str, util: Any) -> None:
    """Wrap a freshly loaded `multiprocessing.util.get_temp_dir` to list the folders it makes."""
    made = util.get_temp_dir
    said: set[str] = set()

    def get_temp_dir() -> str:
        """multiprocessing's own, then the folder's path into the listing (once per folder)."""
        path = made()
        if path not in said:
            said.add(path)
            _list(state_dir, path)
        return str(path)

    util.get_temp_dir = get_temp_dir


def _list(state_dir: str, path: str) -> None:
    """Add `path` to this process's listing; no state folder here (another host): nothing to do."""
    try:
        with open(os.path.join(state_dir, f"{LISTING}{os.getpid()}.txt"), "a") as listing:
            listing.write(path + "\n")
    except OSError:
        pass
