"""Patch a module as soon as it has run: the one import hook every rank-side patch goes through.

Standard library only. Costs one finder on `sys.meta_path` until the module is imported, nothing
after; several patches of one module chain (each finder finds the module through the others).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from typing import Any

Patch = Callable[[Any], object]
C10D = "torch.distributed.distributed_c10d"
"""torch.distributed's Python side (process groups, collective functions, default timeouts);
imported by `import torch`."""


def when_imported(name: str, patch: Patch) -> None:
    """Call `patch(module)` once module `name` has run (now, if it is loaded already).

    The same `patch` for the same module is hooked once however often this is called.
    """
    module = sys.modules.get(name)
    if module is not None:
        _apply(patch, module)
    elif not any(isinstance(f, _PatchOnImport) and (f.name, f.patch) == (name, patch) for f in sys.meta_path):
        sys.meta_path.insert(0, _PatchOnImport(name, patch))


def _apply(patch: Patch, module: Any) -> None:
    """Run a patch; the job must never die of ddptui."""
    with contextlib.suppress(Exception):
        patch(module)


class _PatchOnImport:
    """A meta path finder that lets one module load through the other finders, then patches it."""

    def __init__(self, name: str, patch: Patch) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        """Find the module through the rest of sys.meta_path and wrap its loader; ignore others."""
        if name != self.name:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            spec = getattr(finder, "find_spec", lambda *a: None)(name, path, target)
            if spec is not None:
                break
        else:
            return None
        run = getattr(spec.loader, "exec_module", None)
        if run is not None:
            patch = self.patch

            def exec_module(module: Any) -> None:
                """Run the module, then patch it before anyone uses it."""
                run(module)
                _apply(patch, module)

            spec.loader.exec_module = exec_module
        return spec
