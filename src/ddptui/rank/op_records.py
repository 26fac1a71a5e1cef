"""What every wrapper's record of a torch.distributed call shares: the user's call site, the
group's name, a dtype's name. Standard library only: torch is reached through `sys.modules`.

Used by the collective wrappers (`ddptui.rank.collectives`) and the point-to-point ones
(`ddptui.rank.p2p`), which both keep the last `RING` records, like the Flight Recorder.
"""

from __future__ import annotations

import sys
from typing import Any

from ddptui.rank.call_sites import is_core_library, is_user_code
from ddptui.rank.hooks import C10D

RING = 2000
"""Records the wrappers keep, like the Flight Recorder's default ring."""
_dtype_names: dict[Any, str] = {}


def caller_site(frame: Any) -> list[Any] | None:
    """The innermost user frame from `frame` outwards, as `[file, line, func]`."""
    outside = None
    while frame is not None:
        code = frame.f_code
        if is_user_code(code.co_filename):
            return [code.co_filename, frame.f_lineno or 0, code.co_name]
        if outside is None and not is_core_library(code.co_filename):
            outside = [code.co_filename, frame.f_lineno or 0, code.co_name]
        frame = frame.f_back
    return outside


def group_name(group: Any) -> tuple[str, str]:
    """A process group's name and description; the default group's for None."""
    if group is None:
        c10d = sys.modules.get(C10D)
        # `GroupMember.WORLD` is a tenth of the cost of `_get_default_group()`, which checks more
        group = getattr(getattr(c10d, "GroupMember", None), "WORLD", None)
        if group is None:
            group = getattr(c10d, "_get_default_group", lambda: None)()
    return str(getattr(group, "group_name", "?")), str(getattr(group, "group_desc", ""))


def dtype_name(dtype: Any) -> str:
    """`torch.float32` -> `float32`, cached (str() of a dtype is slow)."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


def replace(c10d: Any, name: str, original: Any, wrapper: Any, originals: dict[str, Any]) -> None:
    """Put `wrapper` in place of `original` in `distributed_c10d` and, where it is the same
    function, in `torch.distributed`; remember the original in `originals`."""
    package = sys.modules.get("torch.distributed")
    originals[name] = original
    setattr(c10d, name, wrapper)
    if package is not None and getattr(package, name, None) is original:
        setattr(package, name, wrapper)


def restore(originals: dict[str, Any]) -> None:
    """Put each original back wherever one of ddptui's wrappers of it still stands."""
    for namespace in (sys.modules.get(C10D), sys.modules.get("torch.distributed")):
        for name, original in originals.items():
            if namespace is not None and getattr(getattr(namespace, name, None), "__wrapped__", None):
                setattr(namespace, name, original)
