"""This rank's collectives, oldest first, for the core's hang, deadlock and mismatch verdicts.

Standard library only at import: torch is reached through `sys.modules`, never imported. The
source is torch's Flight Recorder (on by default for gloo in torch 2.13: a ring of the last 2000
collectives, `TORCH_FR_BUFFER_SIZE`). Where it is off or missing, `install_wrappers()` puts a light
recorder around the `torch.distributed` collective functions instead. What the wrappers cannot see:
collectives issued from C++ — DDP's gradient bucket all-reduces in `backward()`, its parameter
broadcasts at construction and bucket rebuild — and ops called through references taken before
they were installed (`from torch.distributed import all_reduce` run earlier).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import inspect
import os
import pickle
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from ddptui.rank.hooks import when_imported
from ddptui.rank.protocol import is_ddptui, is_library

C10D = "torch.distributed.distributed_c10d"
"""The module defining the Python collective functions; imported by `import torch`."""
C10D_C = "torch._C._distributed_c10d"
"""The C++ bindings, with the Flight Recorder's dump functions."""

RING = 2000
"""Records the wrappers keep, like the Flight Recorder's default ring."""
RETIRE_LAG = 0.005
"""Seconds to wait before looking again at a last entry the recorder still shows pending."""
_dump_lock = threading.Lock()
"""One dump at a time: two would race on torch's lazy-module set (see _inductor_left_unimported)."""

DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
    "ComplexHalf": "complex32",
}
"""The Flight Recorder's c10 scalar type names, as torch users write them (`torch.float32`)."""


def collective_log(last: int | None = None) -> list[dict[str, Any]]:
    """This rank's collectives, oldest first (the `last` ones only), as JSON-able dicts; never raises.

    Each: `seq` (per process group), `op` (`all_reduce`), `raw_op` (`gloo:all_reduce`), `pg` (the
    group's name, `"0"` for the default group), `pg_desc`, `shapes` and `dtypes` of the inputs,
    `out_shapes`, `out_dtypes`, `state` (`issued`, `started`, `completed`, `failed`), `p2p`, `site`
    (the user's call site as `[file, line, func]`, or None) and `source`. A failure is one
    `{"error": ...}` entry.
    """
    try:
        if C10D not in sys.modules:
            return []
        count = None if last is None else max(last, 0)
        return _from_flight_recorder(count) or _from_wrappers(count)
    except Exception as exc:  # a question must never hurt the rank
        return [{"error": f"{type(exc).__name__}: {exc}"[:500]}]


def _tail(items: list[Any], count: int | None) -> list[Any]:
    """The last `count` items (all of them for None)."""
    return items if count is None else items[len(items) - count :] if count else []


# -- the Flight Recorder ------------------------------------------------------------------------


def flight_recorder_on() -> bool:
    """True when torch's Flight Recorder records this rank's gloo collectives (torch >= 2.13, ring > 0).

    Older torch versions may record NCCL only; the wrappers cover those (`collective_log` still
    prefers the recorder whenever it has entries).
    """
    bindings = sys.modules.get(C10D_C)
    torch = sys.modules.get("torch")
    if bindings is None or torch is None or not hasattr(bindings, "_dump_fr_trace"):
        return False
    size = os.environ.get("TORCH_FR_BUFFER_SIZE", os.environ.get("TORCH_NCCL_TRACE_BUFFER_SIZE", ""))
    if size.strip().lstrip("-").isdigit() and int(size) <= 0:
        return False
    return _version(str(getattr(torch, "__version__", ""))) >= (2, 13)


def _version(text: str) -> tuple[int, int]:
    """`2.13.0+cpu` -> (2, 13); (0, 0) when unreadable."""
    parts = text.split(".")
    try:
        return int(parts[0]), int("".join(c for c in parts[1] if c.isdigit()))
    except (IndexError, ValueError):
        return 0, 0


def _from_flight_recorder(count: int | None) -> list[dict[str, Any]]:
    """The Flight Recorder's entries as records; empty when it has none."""
    entries = _fr_entries()
    if entries and _fr_state(entries[-1]) != "completed":
        # Retirement is marked on gloo's worker thread a moment after a blocking call returns:
        # asked right after one, the recorder still calls it pending. Look once more.
        time.sleep(RETIRE_LAG)
        entries = _fr_entries()
    return [_fr_record(entry) for entry in _tail(entries, count)]


def _fr_entries() -> list[dict[str, Any]]:
    """The Flight Recorder's raw entries (with Python stacks where that is safe), oldest first."""
    entries: list[dict[str, Any]] = _fr_dump().get("entries") or []
    entries.sort(key=lambda entry: entry.get("record_id", 0))
    return entries


def _fr_dump() -> dict[str, Any]:
    """The Flight Recorder's whole dump; empty without one."""
    dump = getattr(sys.modules.get(C10D_C), "_dump_fr_trace", None)
    if dump is None:
        return {}
    with _dump_lock, _inductor_left_unimported() as stacks:
        # The pickle, not `_dump_fr_trace_json`: twice as fast, and only it has the Python stacks.
        raw = dump(includeCollectives=True, includeStackTraces=stacks, onlyActive=False)
    trace: dict[str, Any] = pickle.loads(raw)
    return trace


def write_fr_trace(path: str) -> str | None:
    """Write this rank's Flight Recorder dump as torchfrtrace reads it; None, or what went wrong.

    torchfrtrace takes a directory of such files named `<prefix><rank>` (say `rank_0`), each the
    pickled dump. Gloo dumps list one group config under the empty name, and torchfrtrace then
    fails with `KeyError: ('0', 0)`: the configs are rebuilt from torch.distributed's own tables
    (so while the process groups still exist), keyed by group name with `desc` and `ranks`.
    """
    try:
        trace = _fr_dump()
        if not trace:
            return "this torch has no Flight Recorder"
        trace["pg_config"] = _pg_configs() or trace.get("pg_config", {})
        with open(path, "wb") as out:
            pickle.dump(trace, out)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _pg_configs() -> dict[str, dict[str, str]]:
    """`{name: {"name", "desc", "ranks": "[0, 1]"}}` for every live process group."""
    world = getattr(sys.modules.get(C10D), "_world", None)
    names: dict[Any, str] = getattr(world, "pg_names", {})
    members: dict[Any, dict[int, int]] = getattr(world, "pg_group_ranks", {})
    return {
        str(name): {
            "name": str(name),
            "desc": str(getattr(pg, "group_desc", "")),
            "ranks": str(sorted(members.get(pg, {}))),
        }
        for pg, name in names.items()
    }


@contextlib.contextmanager
def _inductor_left_unimported() -> Iterator[bool]:
    """Yield whether stacks may be dumped without importing `torch._inductor`.

    Symbolizing the stacks asks `hasattr(torch, "_inductor")`, which imports it lazily: 850 modules,
    1-4 s holding the import lock and mostly the GIL, inside the user's process. Taking `_inductor`
    out of torch's lazy-module set for the dump makes that `hasattr` plainly false. Without that
    set (another torch), stacks are dumped only once the user has imported inductor anyway.
    """
    torch = sys.modules.get("torch")
    lazy = vars(torch).get("_lazy_modules") if torch is not None else None
    if "torch._inductor" in sys.modules:
        yield True
    elif not isinstance(lazy, set) or "_inductor" not in lazy:
        yield False
    else:
        lazy.discard("_inductor")
        try:
            yield True
        finally:
            lazy.add("_inductor")


def _fr_record(entry: dict[str, Any]) -> dict[str, Any]:
    """One Flight Recorder entry as a record."""
    raw = str(entry.get("profiling_name") or "")
    group = entry.get("process_group") or ("", "")
    p2p = bool(entry.get("is_p2p"))
    return {
        "seq": int(entry.get("p2p_seq_id" if p2p else "collective_seq_id") or 0),
        "op": raw.partition(":")[2] or raw,
        "raw_op": raw,
        "pg": str(group[0]),
        "pg_desc": str(group[1]) if len(group) > 1 else "",
        "shapes": [list(size) for size in entry.get("input_sizes") or ()],
        "dtypes": [DTYPES.get(d, str(d).lower()) for d in entry.get("input_dtypes") or ()],
        "out_shapes": [list(size) for size in entry.get("output_sizes") or ()],
        "out_dtypes": [DTYPES.get(d, str(d).lower()) for d in entry.get("output_dtypes") or ()],
        "state": _fr_state(entry),
        "p2p": p2p,
        "site": _fr_site(entry.get("frames") or ()),
        "source": "flight_recorder",
    }


def _fr_state(entry: dict[str, Any]) -> str:
    """`completed` once retired; gloo entries stay `scheduled` (never `started`) until then.

    Retirement lags the op by a moment (it is marked on gloo's worker thread), and a collective
    that failed because a peer went away is retired too: the state alone never proves a hang.
    """
    if entry.get("retired") or entry.get("state") == "completed":
        return "completed"
    return "started" if entry.get("state") == "started" else "issued"


def _fr_site(frames: Any) -> list[Any] | None:
    """The innermost user frame of a recorded stack (innermost first), as `[file, line, func]`."""
    outside = None
    for frame in frames:
        path = str(frame.get("filename", ""))
        if is_user_code(path):
            return [path, int(frame.get("line", 0)), str(frame.get("name", ""))]
        if outside is None and not _is_core_library(path):
            outside = [path, int(frame.get("line", 0)), str(frame.get("name", ""))]
    return outside


# -- call sites ---------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def is_user_code(path: str) -> bool:
    """True for the user's own files: not torch, the standard library, site-packages or ddptui."""
    return not is_library(path) and not _is_core_library(path)


@functools.lru_cache(maxsize=4096)
def _is_core_library(path: str) -> bool:
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


def _caller_site(frame: Any) -> list[Any] | None:
    """The innermost user frame from `frame` outwards, as `[file, line, func]`."""
    outside = None
    while frame is not None:
        code = frame.f_code
        if is_user_code(code.co_filename):
            return [code.co_filename, frame.f_lineno or 0, code.co_name]
        if outside is None and not _is_core_library(code.co_filename):
            outside = [code.co_filename, frame.f_lineno or 0, code.co_name]
        frame = frame.f_back
    return outside


# -- the fallback: wrappers around torch.distributed's collective functions ---------------------

P2P_OPS = ("send", "recv", "isend", "irecv")
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
"""Wrapped functions and the parameter holding their input tensors (None: no input)."""

_log: collections.deque[dict[str, Any]] = collections.deque(maxlen=RING)
_counters: dict[tuple[str, bool], int] = {}
_counter_lock = threading.Lock()
_originals: dict[str, Any] = {}
_dtype_names: dict[Any, str] = {}
_inside = threading.local()
"""`call` is True on a thread while a wrapped function runs."""


def _from_wrappers(count: int | None) -> list[dict[str, Any]]:
    """The wrappers' records, copied (a record's state may change while it is being sent)."""
    return [dict(record) for record in _tail(list(_log), count)]


def install_wrappers(module: Any = None) -> bool:
    """Wrap the collective functions of `torch.distributed` (or `module`, a `distributed_c10d` being
    imported); idempotent. True when the wrappers are in place.
    """
    c10d = module if module is not None else sys.modules.get(C10D)
    if c10d is None:
        return False
    package = sys.modules.get("torch.distributed")
    for name, param in OPS.items():
        original = getattr(c10d, name, None)
        if original is None or name in _originals:
            continue
        wrapper = _wrap(name, original, param)
        _originals[name] = original
        setattr(c10d, name, wrapper)
        if package is not None and getattr(package, name, None) is original:
            setattr(package, name, wrapper)
    return bool(_originals)


def uninstall_wrappers() -> None:
    """Put the original functions back (benchmarks and tests)."""
    for namespace in (sys.modules.get(C10D), sys.modules.get("torch.distributed")):
        for name, original in _originals.items():
            if namespace is not None and getattr(getattr(namespace, name, None), "__wrapped__", None):
                setattr(namespace, name, original)
    _originals.clear()


def install_wrappers_on_import() -> None:
    """Install the wrappers as soon as torch.distributed loads, unless the Flight Recorder will cover it.

    For the rank's start-up: costs one import hook until torch is imported, nothing after.
    """
    when_imported(C10D, _wrap_unless_recorded)


def _wrap_unless_recorded(module: Any) -> None:
    """Wrap the collectives of a freshly loaded `distributed_c10d` when no Flight Recorder covers them."""
    if not flight_recorder_on():
        install_wrappers(module)


def _wrap(name: str, original: Callable[..., Any], param: str | None) -> Callable[..., Any]:
    """`original` recording each call: issued before it runs, completed or failed after."""
    names = list(inspect.signature(original).parameters)
    at = names.index(param) if param in names else None
    at_group = names.index("group") if "group" in names else None
    p2p = name in P2P_OPS

    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_inside, "call", False):  # `send` runs `isend`: one user call, one record
            return original(*args, **kwargs)
        record = _issue(
            name, p2p, _argument(args, kwargs, param, at), _argument(args, kwargs, "group", at_group)
        )
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


def _issue(op: str, p2p: bool, tensors: Any, group: Any) -> dict[str, Any]:
    """Append the record of a call about to run; a failure here yields a detached record."""
    try:
        record = _new_record(op, p2p, tensors, group, sys._getframe(2))
    except Exception:
        return {}
    _log.append(record)
    return record


def _new_record(op: str, p2p: bool, tensors: Any, group: Any, caller: Any) -> dict[str, Any]:
    """The record of one call, numbered in its group like the Flight Recorder numbers them."""
    pg, desc = _group_name(group)
    inputs = [] if tensors is None else list(tensors) if isinstance(tensors, list | tuple) else [tensors]
    with _counter_lock:
        seq = _counters.get((pg, p2p), 0) + 1
        _counters[(pg, p2p)] = seq
    return {
        "seq": seq,
        "op": op,
        "raw_op": op,
        "pg": pg,
        "pg_desc": desc,
        "shapes": [list(t.shape) for t in inputs],
        "dtypes": [_dtype_name(t.dtype) for t in inputs],
        "out_shapes": [],
        "out_dtypes": [],
        "state": "issued",
        "p2p": p2p,
        "site": _caller_site(caller),
        "source": "wrappers",
    }


def _group_name(group: Any) -> tuple[str, str]:
    """A process group's name and description; the default group's for None."""
    if group is None:
        group = getattr(sys.modules.get(C10D), "_get_default_group", lambda: None)()
    return str(getattr(group, "group_name", "?")), str(getattr(group, "group_desc", ""))


def _dtype_name(dtype: Any) -> str:
    """`torch.float32` -> `float32`, cached (str() of a dtype is slow)."""
    name = _dtype_names.get(dtype)
    if name is None:
        name = _dtype_names[dtype] = str(dtype).removeprefix("torch.")
    return name


def _finish(record: dict[str, Any], result: Any) -> None:
    """Mark a blocking call completed now, an async one when its work completes."""
    if not record:
        return
    if result is None or not hasattr(result, "get_future"):
        record["state"] = "completed"
        return
    # A work without a future (some send/recv) stays `issued`: shown, never misread as done.
    with contextlib.suppress(Exception):
        result.get_future().add_done_callback(lambda _: record.__setitem__("state", "completed"))
