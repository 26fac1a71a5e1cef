"""Leave a record of where a rank died of a fatal signal, for the core to read after it exits.

A rank killed by SIGSEGV, SIGABRT, SIGBUS, SIGFPE or SIGILL runs no Python code after the signal:
no exception, no post-mortem, nothing on the side channel. faulthandler's C handler still writes
every thread's Python stack, so it writes them to a file the core reads once the rank is gone
(see `ddptui.core.model.fatal.fatal_site`). Standard library only: this runs inside the rank.
"""

from __future__ import annotations

import faulthandler
from typing import IO, Any

_dump_file: IO[Any] | None = None
"""The open dump file. The signal handler writes to its descriptor, so it must never be closed."""


def install(path: str) -> None:
    """Dump every thread's stack to `path` when the rank dies of a fatal signal; no-op for ''.

    The file is truncated now, so what the core finds there after the rank died is this process's
    dump only; forked children (DataLoader workers) share the descriptor and its offset, so their
    dumps follow instead of overwriting. Replaces any earlier `faulthandler.enable` (a `-X
    faulthandler` writing to stderr, which the rank's terminal would scroll away).
    """
    global _dump_file
    if not path:
        return
    file = open(path, "w")  # noqa: SIM115 - kept open for the life of the process
    faulthandler.enable(file=file, all_threads=True)
    if _dump_file is not None:
        _dump_file.close()  # only once faulthandler holds the new file, never while it may write
    _dump_file = file
