"""torch's Flight Recorder, read: this rank's collectives as records, and its dump for torchfrtrace.

Standard library only at import: torch is reached through `sys.modules`, never imported. Where the
recorder is off or has no entries, `ddptui.rank.collectives` falls back to its own wrappers.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import pickle
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

from ddptui.rank.call_sites import is_core_library, is_user_code
from ddptui.rank.hooks import C10D

C10D_C = "torch._C._distributed_c10d"
"""The C++ bindings, with the Flight Recorder's dump functions."""

RETIRE_LAG = 0.005
"""Seconds to wait before looking again at entries the recorder still shows pending."""
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


def from_flight_recorder(count: int | None, beside: Sequence[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The Flight Recorder's entries as records, the last `count` of them; empty when it has none.

    `beside`: ddptui's own point-to-point records (each with its `time_ns`, oldest first), merged
    in by time; where there are some, the recorder's own point-to-point entries (NCCL keeps
    them, without the peer) are left out for them.
    """
    entries = _fr_entries()
    if any(_fr_state(entry) != "completed" for entry in tail(entries, count)):
        # Retirement is marked on gloo's worker thread a moment after a blocking call returns:
        # asked right after one (or while that thread lags), the recorder still calls it
        # pending, even behind a later op already retired. Look once more.
        time.sleep(RETIRE_LAG)
        entries = _fr_entries()
    if not beside or not entries:
        return [_fr_record(entry) for entry in tail(entries, count)]
    # The last `count` of the merge are among the last `count` of each side.
    entries = tail([entry for entry in entries if not entry.get("is_p2p")], count)
    timed = ((int(entry.get("time_created_ns") or 0), _fr_record(entry)) for entry in entries)
    ours = ((int(record.get("time_ns") or 0), record) for record in tail(list(beside), count))
    merged = heapq.merge(timed, ours, key=lambda pair: pair[0])
    return tail([record for _, record in merged], count)


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
        if outside is None and not is_core_library(path):
            outside = [path, int(frame.get("line", 0)), str(frame.get("name", ""))]
    return outside


def tail(items: list[Any], count: int | None) -> list[Any]:
    """The last `count` items (all of them for None)."""
    return items if count is None else items[len(items) - count :] if count else []
