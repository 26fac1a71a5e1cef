"""Whose code a file is: the user's, or a library's; for the call sites of collective records and
the frame a stop before a collective opens at. Standard library only: torch is reached through
`sys.modules`, never imported.
"""

from __future__ import annotations

import functools
import os
import sys

from ddptui.rank.paths import is_ddptui, is_library


@functools.lru_cache(maxsize=4096)
def is_user_code(path: str) -> bool:
    """True for the user's own files: not torch, the standard library, site-packages or ddptui."""
    return not is_library(path) and not is_core_library(path)


@functools.lru_cache(maxsize=4096)
def is_core_library(path: str) -> bool:
    """True for torch (wherever it is installed), the standard library and ddptui's rank side.

    The fallback call site skips only these: a job started as `-m installed_package` has no
    frames outside site-packages, and its innermost frame there is still the best answer.
    """
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None) or ""
    torch_dir = os.path.dirname(torch_file) + os.sep if torch_file else None
    if torch_dir and path.startswith(torch_dir):
        return True
    if path.startswith("<") or is_ddptui(path):
        return True
    return is_library(path) and "-packages/" not in path
