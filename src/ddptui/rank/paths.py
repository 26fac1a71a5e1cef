"""Where a frame's file stands (the user's code, a library, ddptui's own) and how a user reads a
path. Imported by both sides. Standard library only."""

from __future__ import annotations

import functools
import os


@functools.lru_cache(maxsize=1024)
def short_path(path: str) -> str:
    """A path as users read it: relative to the working directory when inside it, else the name.

    Cached: the working directory of a ddptui process never changes, and views ask on every redraw.
    """
    if not os.path.isabs(path):
        return path
    rel = os.path.relpath(path)
    return os.path.basename(path) if rel.startswith("..") else rel


_DDPTUI_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_DEMO_DIR = os.path.join(_DDPTUI_DIR, "demo") + os.sep


@functools.cache
def _library_dirs() -> tuple[str, ...]:
    """The interpreter's library directories (worked out at the first frame looked at, not at every
    rank's start: sysconfig's paths take 1-1.5 ms, and torch does not import sysconfig)."""
    import sysconfig

    return tuple({sysconfig.get_paths()[key] for key in ("stdlib", "platstdlib", "purelib", "platlib")})


def is_ddptui(path: str) -> bool:
    """True for ddptui's own code; the bundled demo is user code like any other script."""
    return path.startswith(_DDPTUI_DIR) and not path.startswith(_DEMO_DIR)


_RENDEZVOUS = os.path.join("torch", "distributed", "rendezvous.py")


def creates_store(path: str, func: str) -> bool:
    """True for torch's `_create_c10d_store`, where a rank makes its rendezvous store (and a client
    retries its connect with a growing backoff)."""
    return func == "_create_c10d_store" and path.endswith(_RENDEZVOUS)


def is_library(path: str) -> bool:
    """True for frames outside the user's code: stdlib, site-packages, frozen modules, ddptui."""
    if is_ddptui(path):
        return True
    if path.startswith(_DEMO_DIR):
        return False
    return path.startswith(("<", *_library_dirs())) or "/site-packages/" in path or "/dist-packages/" in path
