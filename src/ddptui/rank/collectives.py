"""This rank's collectives, oldest first, for the core's hang, deadlock and mismatch verdicts.

Standard library only at import: torch is reached through `sys.modules`, never imported. The
source is torch's Flight Recorder, read by `ddptui.rank.flight_recorder` (on by default for gloo in
torch 2.13: a ring of the last 2000 collectives, `TORCH_FR_BUFFER_SIZE`). Where it is off or
missing, `install_wrappers()` puts a light recorder around the `torch.distributed` collective
functions instead. What the wrappers cannot see: collectives issued from C++ — DDP's gradient
bucket all-reduces in `backward()`, its parameter broadcasts at construction and bucket rebuild —
and ops called through references taken before they were installed (`from torch.distributed
import all_reduce` run earlier). Point-to-point ops, which the recorder does not keep on gloo,
are always recorded by `ddptui.rank.p2p` and merged in by time.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import heapq
import inspect
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ddptui.rank import op_records, p2p
from ddptui.rank.flight_recorder import flight_recorder_on, from_flight_recorder, tail
from ddptui.rank.hooks import C10D, when_imported
from ddptui.rank.op_records import RING, caller_site, dtype_name, group_name


def collective_log(last: int | None = None) -> list[dict[str, Any]]:
    """This rank's collectives and point-to-point ops, oldest first (the `last` ones only), as
    JSON-able dicts; never raises.

    Each: `seq` (per process group; for point-to-point ops per group, peer, direction and tag),
    `op` (`all_reduce`), `raw_op` (`gloo:all_reduce`), `pg` (the group's name, `"0"` for the
    default group), `pg_desc`, `shapes` and `dtypes` of the inputs, `out_shapes`, `out_dtypes`,
    `state` (`issued`, `started`, `completed`, `failed`), `p2p`, `site` (the user's call site as
    `[file, line, func]`, or None) and `source`; the wrappers' records add `time_ns`, and
    point-to-point ones `peer` (a global rank), `direction` (`send`, `recv`) and `tag`. A failure
    is one `{"error": ...}` entry.
    """
    try:
        if C10D not in sys.modules:
            return []
        count = None if last is None else max(last, 0)
        ours = p2p.p2p_log()
        return from_flight_recorder(count, ours) or _from_wrappers(count, ours)
    except Exception as exc:  # a question must never hurt the rank
        return [{"error": f"{type(exc).__name__}: {exc}"[:500]}]


# -- the fallback: wrappers around torch.distributed's collective functions ---------------------

P2P_OPS = tuple(p2p.OPS)
"""Point-to-point functions: `ddptui.rank.p2p` wraps them, always."""
OPS: dict[str, str | None] = {
    "all_reduce": "tensor",
    "broadcast": "tensor",
    "reduce": "tensor",
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "gather": "tensor",
    "scatter": "tensor",  # the output: only the root passes a scatter_list
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "all_to_all": "input_tensor_list",
    "all_to_all_single": "input",
    "all_reduce_coalesced": "tensors",
    "barrier": None,
    "send": "tensor",
    "recv": "tensor",
    "isend": "tensor",
    "irecv": "tensor",
}
"""Collective and point-to-point functions and the parameter holding their input tensors (None: no
input); `ddptui.rank.until` stops before each."""

_dtype_name = dtype_name
_group_name = group_name
"""Kept under these names for `ddptui.rank.until`, which describes the collective it stops before."""
_log: collections.deque[dict[str, Any]] = collections.deque(maxlen=RING)
_counters: dict[str, int] = {}
_counter_lock = threading.Lock()
_originals: dict[str, Any] = {}
_inside = threading.local()
"""`call` is True on a thread while a wrapped function runs."""


def _from_wrappers(count: int | None, ours: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wrappers' records, copied (a record's state may change while it is being sent), with the
    point-to-point records `ours` merged in by time."""
    records = heapq.merge([dict(record) for record in _log], ours, key=lambda record: record["time_ns"])
    return tail(list(records), count)


def install_wrappers(module: Any = None) -> bool:
    """Wrap the collective and point-to-point functions of `torch.distributed` (or `module`, a
    `distributed_c10d` being imported); idempotent. True when the wrappers are in place.
    """
    c10d = module if module is not None else sys.modules.get(C10D)
    if c10d is None:
        return False
    p2p.install(c10d)
    for name, param in OPS.items():
        original = getattr(c10d, name, None)
        if original is None or name in _originals or name in P2P_OPS:
            continue
        op_records.replace(c10d, name, original, _wrap(name, original, param), _originals)
    return bool(_originals)


def uninstall_wrappers() -> None:
    """Put the original functions back (benchmarks and tests)."""
    op_records.restore(_originals)
    _originals.clear()
    p2p.uninstall()


def install_wrappers_on_import() -> None:
    """Install the wrappers as soon as torch.distributed loads: the point-to-point ones always, the
    collective ones unless the Flight Recorder will cover them.

    For the rank's start-up: costs one import hook until torch is imported, nothing after.
    """
    when_imported(C10D, _wrap_unless_recorded)


def _wrap_unless_recorded(module: Any) -> None:
    """Wrap the point-to-point functions of a freshly loaded `distributed_c10d`, and its collectives
    when no Flight Recorder covers them."""
    if flight_recorder_on():
        p2p.install(module)
    else:
        install_wrappers(module)


def _wrap(name: str, original: Callable[..., Any], param: str | None) -> Callable[..., Any]:
    """`original` recording each call: issued before it runs, completed or failed after."""
    names = list(inspect.signature(original).parameters)
    at = names.index(param) if param in names else None
    at_group = names.index("group") if "group" in names else None

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "call", False):  # a collective run by another: one user call, one record
            return original(*args, **kwargs)
        record = _issue(name, _argument(args, kwargs, param, at), _argument(args, kwargs, "group", at_group))
        _inside.call = True
        try:
            result = original(*args, **kwargs)
        except BaseException:
            record["state"] = "failed"
            raise
        finally:
            _inside.call = False
        _finish(record, result)
        return result

    return wrapper


def _argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str | None, at: int | None) -> Any:
    """One argument of a call, by keyword or position; None when absent."""
    if name is None:
        return None
    if name in kwargs:
        return kwargs[name]
    return args[at] if at is not None and at < len(args) else None


def _issue(op: str, tensors: Any, group: Any) -> dict[str, Any]:
    """Append the record of a call about to run; a failure here yields a detached record."""
    try:
        record = _new_record(op, tensors, group, sys._getframe(2))
    except Exception:
        return {}
    _log.append(record)
    return record


def _new_record(op: str, tensors: Any, group: Any, caller: Any) -> dict[str, Any]:
    """The record of one call, numbered in its group like the Flight Recorder numbers them."""
    pg, desc = group_name(group)
    inputs = [] if tensors is None else list(tensors) if isinstance(tensors, list | tuple) else [tensors]
    with _counter_lock:
        seq = _counters[pg] = _counters.get(pg, 0) + 1
    return {
        "seq": seq,
        "op": op,
        "raw_op": op,
        "pg": pg,
        "pg_desc": desc,
        "shapes": [list(t.shape) for t in inputs],
        "dtypes": [dtype_name(t.dtype) for t in inputs],
        "out_shapes": [],
        "out_dtypes": [],
        "state": "issued",
        "p2p": False,
        "site": caller_site(caller),
        "source": "wrappers",
        "time_ns": time.time_ns(),
    }


def _finish(record: dict[str, Any], result: Any) -> None:
    """Mark a blocking call completed now, an async one when its work completes."""
    if not record:
        return
    if result is None or not hasattr(result, "get_future"):
        record["state"] = "completed"
        return
    # A work without a future stays `issued`: shown, never misread as done.
    with contextlib.suppress(Exception):
        result.get_future().add_done_callback(lambda _: record.__setitem__("state", "completed"))
