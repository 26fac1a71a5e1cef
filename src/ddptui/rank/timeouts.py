"""Process-group timeouts that survive a pause: raised before the user's code runs, the asked ones kept.

A rank waiting in a collective for a peer paused at a prompt fails once the group's timeout has
passed (30 min by default on gloo, seconds where the job asks for it). Raising the timeout later is
too late: `_set_pg_timeout` applies to collectives issued after it (a wait in progress keeps its
deadline), and under `TORCH_DISTRIBUTED_DEBUG=DETAIL` the wrapper's helper group keeps the timeout
it was created with. So the raise happens where groups are made: torch's default timeouts are
raised as `distributed_c10d` loads, and `init_process_group`, `new_group` and `split_group` get an
explicit `timeout=` raised too (which also covers the rendezvous store). `_set_pg_timeout` is
wrapped the same way, so `torch.distributed.breakpoint()`'s 3600 s never lowers the raise.

Standard library only at import: torch is reached through `sys.modules`, never imported. A timeout
is only ever raised, never lowered. What each group would have had without ddptui is kept for the
core to show (`user_timeouts()`).
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import inspect
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from ddptui.rank.hooks import C10D, when_imported

PG_TIMEOUT_ENV = "DDPTUI_PG_TIMEOUT"
"""Environment variable holding the timeout, in seconds, every process group gets at least."""
DEFAULT_PG_TIMEOUT = 24 * 3600.0
"""Seconds, when the variable is unset or unreadable: a day of debugging."""

CREATORS = ("init_process_group", "new_group", "split_group")
"""Functions whose `timeout=` is raised. `new_subgroups*` and `init_device_mesh` go through them."""
DEFAULTS = ("default_pg_timeout", "default_pg_nccl_timeout")
"""The module's default timeouts (timedelta, or None where NCCL is not built), read at each call."""

_user: dict[str, float] = {}
"""Process group name -> the seconds it would have had without ddptui, for raised groups only."""
_lock = threading.Lock()
_originals: dict[str, Any] = {}
"""What `install` replaced in the module (functions and defaults), to put back."""
_limit = DEFAULT_PG_TIMEOUT


def pg_timeout() -> float:
    """The timeout every process group gets at least: `DDPTUI_PG_TIMEOUT`, or a day."""
    text = os.environ.get(PG_TIMEOUT_ENV, "")
    try:
        seconds = float(text)
    except ValueError:
        return DEFAULT_PG_TIMEOUT
    return seconds if 0 < seconds < float("inf") else DEFAULT_PG_TIMEOUT


def user_timeouts() -> dict[str, float]:
    """Live process groups whose timeout ddptui raised: name (`"0"` = the default group) -> seconds.

    The seconds are what the group would have had without ddptui: the job's own `timeout=` (or its
    latest `_set_pg_timeout`, `torch.distributed.breakpoint()`'s included), else torch's default.
    Never raises; empty before any group exists.
    """
    try:
        live = set(_group_names().values())
        with _lock:
            return {name: seconds for name, seconds in _user.items() if name in live}
    except Exception:
        return {}


def _group_names() -> dict[Any, str]:
    """Every live process group -> its name, from torch.distributed's own table."""
    world = getattr(sys.modules.get(C10D), "_world", None)
    return dict(getattr(world, "pg_names", None) or {})


# -- installing -----------------------------------------------------------------------------------


def install(module: Any = None) -> bool:
    """Raise the default timeouts of `distributed_c10d` (or `module`, one being imported) and wrap
    its group makers; idempotent. True when the raise is in place.
    """
    global _limit
    c10d = module if module is not None else sys.modules.get(C10D)
    if c10d is None:
        return False
    if _originals:
        return True
    _limit = pg_timeout()
    for name in DEFAULTS:
        value = getattr(c10d, name, None)
        _originals[name] = value
        if isinstance(value, datetime.timedelta) and value.total_seconds() < _limit:
            setattr(c10d, name, datetime.timedelta(seconds=_limit))
    for name in (*CREATORS, "_set_pg_timeout"):
        original = getattr(c10d, name, None)
        if original is not None:
            _originals[name] = original
            wrap = _wrap_setter if name == "_set_pg_timeout" else _wrap_creator
            setattr(c10d, name, wrap(original))
    _replace_in_package(c10d)
    return True


def _replace_in_package(c10d: Any) -> None:
    """Point `torch.distributed`'s copies at the wrappers, when it copied the originals already."""
    package = sys.modules.get("torch.distributed")
    for name, original in _originals.items():
        if hasattr(package, name) and getattr(package, name) is original:
            setattr(package, name, getattr(c10d, name))


def uninstall() -> None:
    """Put torch's functions and defaults back and forget the recorded timeouts (tests)."""
    for namespace in (sys.modules.get(C10D), sys.modules.get("torch.distributed")):
        for name, original in _originals.items():
            current = getattr(namespace, name, None)
            if hasattr(namespace, name) and (name in DEFAULTS or getattr(current, "__wrapped__", None)):
                setattr(namespace, name, original)
    _originals.clear()
    with _lock:
        _user.clear()


def install_on_import() -> None:
    """Raise the timeouts as soon as torch.distributed loads, before any group can be made.

    For the rank's start-up: costs one import hook until torch is imported, nothing after.
    """
    when_imported(C10D, install)


# -- the wrappers ---------------------------------------------------------------------------------


def _wrap_creator(original: Callable[..., Any]) -> Callable[..., Any]:
    """`original` (a group maker) with its `timeout=` raised and the asked one recorded per new group."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = _bind(signature, args, kwargs)
        if bound is None:
            return original(*args, **kwargs)
        asked = _raise(bound)
        before = set(_group_names())
        try:
            return original(*bound.args, **bound.kwargs)
        finally:
            _record_new_groups(before, asked)

    return wrapper


def _wrap_setter(original: Callable[..., Any]) -> Callable[..., Any]:
    """`_set_pg_timeout` that never lowers a group below the raise, and records what was asked."""
    signature = inspect.signature(original)

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = _bind(signature, args, kwargs)
        if bound is None:
            return original(*args, **kwargs)
        asked = _raise(bound)
        result = original(*bound.args, **bound.kwargs)
        if asked is not None:
            with contextlib.suppress(Exception):
                _record(_group_name(bound.arguments.get("group")), asked)
        return result

    return wrapper


def _bind(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> inspect.BoundArguments | None:
    """The call's arguments by name; None when they do not fit or the timeout is no timedelta
    (torch reports those itself).
    """
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None
    timeout = bound.arguments.get("timeout")
    return bound if timeout is None or isinstance(timeout, datetime.timedelta) else None


def _raise(bound: inspect.BoundArguments) -> float | None:
    """Raise a call's timeout that is below the raise; the seconds asked (None: none asked)."""
    timeout = bound.arguments.get("timeout")
    if timeout is None:
        return None
    asked = float(timeout.total_seconds())
    if asked < _limit:
        bound.arguments["timeout"] = datetime.timedelta(seconds=_limit)
    return asked


def _record_new_groups(before: set[Any], asked: float | None) -> None:
    """Record the asked timeout (torch's default when none was) of every group made since `before`."""
    with contextlib.suppress(Exception):
        c10d = sys.modules.get(C10D)
        backends = getattr(getattr(c10d, "_world", None), "pg_map", None) or {}
        for group, name in _group_names().items():
            if group not in before:
                backend = backends.get(group, ("",))[0]
                _record(name, _torch_default(str(backend)) if asked is None else asked)


def _torch_default(backend: str) -> float:
    """The timeout torch gives a group of `backend` when none is asked (NCCL's is shorter)."""
    default = _originals.get("default_pg_timeout")
    nccl = _originals.get("default_pg_nccl_timeout")
    if backend == "nccl" and isinstance(nccl, datetime.timedelta):
        default = nccl
    return default.total_seconds() if isinstance(default, datetime.timedelta) else 1800.0


def _group_name(group: Any) -> str:
    """A process group's name; the default group's for None."""
    if group is None:
        group = getattr(sys.modules.get(C10D), "_get_default_group", lambda: None)()
    return str(getattr(group, "group_name", "0"))


def _record(name: str, asked: float) -> None:
    """Keep `asked` for group `name` while the raise covers it; forget it where it does not."""
    with _lock:
        if asked < _limit:
            _user[name] = asked
        else:
            _user.pop(name, None)
