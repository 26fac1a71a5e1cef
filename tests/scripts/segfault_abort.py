"""Dies of SIGABRT: `os.abort()` called from the script's own line (no library frame above it)."""

import os


def give_up() -> None:
    """Abort the process."""
    os.abort()  # the site fatal_site names: segfault_abort.py:8


give_up()
