"""Dies of SIGSEGV inside a library call: `ctypes.string_at` (a Python function) reads address 0."""

import ctypes
import threading


def read_null() -> bytes:
    """Read a C string at address 0."""
    return ctypes.string_at(0)  # the site fatal_site names: segfault.py:9 (in string_at)


threading.Thread(
    target=threading.Event().wait, name="idle", daemon=True
).start()  # another thread in the dump
read_null()
