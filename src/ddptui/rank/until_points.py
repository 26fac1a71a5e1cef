"""Where a stop before a collective stands: wrappers that exist only while `:until-collective` is armed.

Standard library only; torch is reached through `sys.modules`. Three kinds of point, each handing
the main thread's calls to one hook (`install(hook)`) before the collective runs:

- `pg`: the `ProcessGroup` methods every `torch.distributed` collective ends in
  (`group.allreduce(...)`, `group.send(...)`). They are looked up on the class at each call, so
  they see what wrappers of the `torch.distributed` functions missed: calls through references
  taken at import (`from torch.distributed import all_reduce`, DTensor's `mesh_broadcast`), the
  functions those wrappers did not know (FSDP2's `all_gather_single` and `reduce_scatter_single`)
  — and no `torch.distributed` function changes identity (`P2POp.op is isend` still holds in
  `batch_isend_irecv`).
- `op`: the functional collective ops (`torch.ops._c10d_functional.all_reduce`...): what DTensor,
  tensor parallel and `_functional_collectives` issue. They reach the process group from C++.
- `backward`: `torch.autograd.backward`, where DDP all-reduces gradients from C++.

Unarmed, torch's own objects are back in place: nothing of this runs.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ddptui.rank.hooks import C10D

AUTOGRAD = "torch.autograd"
PG_METHODS = (
    "allreduce", "allreduce_coalesced", "allgather", "_allgather_base", "all_gather_single",
    "allgather_coalesced", "allgather_into_tensor_coalesced", "all_gather_single_coalesced",
    "reduce_scatter", "_reduce_scatter_base", "reduce_scatter_single",
    "reduce_scatter_tensor_coalesced", "reduce_scatter_single_coalesced", "broadcast", "reduce",
    "gather", "scatter", "alltoall", "alltoall_base", "all_to_all_single", "barrier",
    "monitored_barrier", "send", "recv", "recv_anysource",
)  # fmt: skip
"""The `ProcessGroup` methods that run a collective (not `_start_coalescing`, `split_group`...)."""
OP_NAMESPACES = ("_c10d_functional", "_c10d_functional_autograd")
FUNCTIONAL_OPS = (
    "all_reduce", "all_reduce_", "all_reduce_coalesced", "all_reduce_coalesced_",
    "all_gather_into_tensor", "all_gather_into_tensor_out", "all_gather_into_tensor_coalesced",
    "reduce_scatter_tensor", "reduce_scatter_tensor_out", "reduce_scatter_tensor_coalesced",
    "all_to_all_single", "broadcast", "broadcast_", "isend", "irecv", "batch_p2p_ops",
)  # fmt: skip
"""The functional collective ops (`wait_tensor` waits for one: it is none)."""


@dataclass(frozen=True)
class Call:
    """One call the main thread is about to make at a point: `pg`, `op` or `backward`."""

    point: str
    name: str
    """The method (`allreduce`) or op (`all_reduce`); `backward` for `torch.autograd.backward`."""
    args: tuple[Any, ...]
    """Positional arguments; the process group first for a `pg` call."""
    kwargs: dict[str, Any]
    caller: types.FrameType


Hook = Callable[[Call], None]


class _Points:
    """What stands in for torch's own objects now, and what they replaced."""

    hook: Hook | None = None
    inside = False
    """True while the main thread runs a wrapped call: what it calls itself is part of it."""
    methods: dict[str, Any] = {}
    """`ProcessGroup` method name -> the class attribute the wrapper replaced."""
    ops: dict[tuple[str, str], Any] = {}
    """(namespace, op) -> the op packet the wrapper replaced."""
    backward: Callable[..., Any] | None = None
    missing: set[tuple[str, str]] = set()
    """(namespace, op) this torch does not have: looking for one again costs ~5 µs each arm."""


def install(hook: Hook) -> bool:
    """Put every point in place, calling `hook` before each; False while torch is not loaded yet."""
    c10d, torch = sys.modules.get(C10D), sys.modules.get("torch")
    group_class = getattr(c10d, "ProcessGroup", None)
    if group_class is None or getattr(torch, "ops", None) is None:
        return False
    _Points.hook = hook
    _wrap_methods(group_class)
    _wrap_ops(torch.ops)  # type: ignore[union-attr]
    _wrap_backward()
    return True


def armed() -> bool:
    """Whether a wrapper stands anywhere (`install` ran since the last `uninstall`)."""
    return bool(_Points.methods or _Points.ops or _Points.backward is not None)


def uninstall() -> None:
    """Put torch's own objects back wherever a wrapper still stands."""
    group_class = getattr(sys.modules.get(C10D), "ProcessGroup", None)
    for name, original in _Points.methods.items():
        if group_class is not None and _is_ours(group_class.__dict__.get(name)):
            setattr(group_class, name, original)
    _Points.methods.clear()
    ops = getattr(sys.modules.get("torch"), "ops", None)
    for (space, name), packet in _Points.ops.items():
        namespace = getattr(ops, space, None)
        if _is_ours(getattr(namespace, name, None)):
            setattr(namespace, name, packet)
    _Points.ops.clear()
    autograd = sys.modules.get(AUTOGRAD)
    if _Points.backward is not None and _is_ours(getattr(autograd, "backward", None)):
        autograd.backward = _Points.backward  # type: ignore[union-attr]
    _Points.backward = None


def _is_ours(value: object) -> bool:
    """Whether `value` is one of these wrappers."""
    return bool(getattr(value, "__ddptui_until__", False))


def _through(point: str, name: str, original: Callable[..., Any], nests: bool = True) -> Callable[..., Any]:
    """`original`, calling the hook first when the main thread calls it (from outside a wrapped
    call); `nests`: what it calls is part of it (not for `backward`: the collectives in it are not)."""
    main = threading.main_thread().ident

    def through(*args: Any, **kwargs: Any) -> Any:
        """Hand the call to the hook, then run it (the hook may have held the thread at a prompt)."""
        if threading.get_ident() != main or _Points.inside or _Points.hook is None:
            return original(*args, **kwargs)
        _Points.hook(Call(point, name, args, kwargs, sys._getframe(2)))
        if not nests:
            return original(*args, **kwargs)
        _Points.inside = True
        try:
            return original(*args, **kwargs)
        finally:
            _Points.inside = False

    return through


def _wrap_methods(group_class: Any) -> None:
    """Wrap the collective methods of `ProcessGroup` (a pybind class: its attributes can be set)."""
    for name in PG_METHODS:
        original = group_class.__dict__.get(name)
        if original is None or _is_ours(original) or name in _Points.methods:
            continue
        _Points.methods[name] = original
        setattr(group_class, name, _method(_through("pg", name, original), original))


def _method(through: Callable[..., Any], original: Any) -> Callable[..., Any]:
    """A function to set on the class for `through` (a plain function binds `self` as a method)."""

    def method(*args: Any, **kwargs: Any) -> Any:
        """A `ProcessGroup` collective method, stopped before when armed."""
        return through(*args, **kwargs)

    functools.update_wrapper(method, original, updated=())
    method.__ddptui_until__ = True  # type: ignore[attr-defined]
    return method


class _OpPacket:
    """A functional collective op (`torch.ops._c10d_functional.all_reduce`) whose calls stop first;
    its overloads and every other attribute are the packet's own (`.default` is not stopped at)."""

    __ddptui_until__ = True

    def __init__(self, name: str, packet: Any) -> None:
        self._packet = packet
        self._call = _through("op", name.rstrip("_").removesuffix("_out"), packet)  # in place: the same op

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the op, stopped before when armed."""
        return self._call(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        """The packet's own attribute."""
        return getattr(self._packet, attr)


def _wrap_ops(ops: Any) -> None:
    """Wrap the functional collective ops in their `torch.ops` namespaces (looked up at each call)."""
    for space in OP_NAMESPACES:
        namespace = getattr(ops, space, None)
        for name in FUNCTIONAL_OPS:
            if (space, name) in _Points.missing:
                continue
            try:
                packet = getattr(namespace, name)
            except Exception:  # not an op of this namespace (or of this torch)
                _Points.missing.add((space, name))
                continue
            if _is_ours(packet) or (space, name) in _Points.ops:
                continue
            _Points.ops[(space, name)] = packet
            setattr(namespace, name, _OpPacket(name, packet))


def _wrap_backward() -> None:
    """Wrap `torch.autograd.backward` (what `loss.backward()` calls): DDP all-reduces in it."""
    autograd = sys.modules.get(AUTOGRAD)
    original = getattr(autograd, "backward", None)
    if original is None or _Points.backward is not None or _is_ours(original):
        return
    through = _through("backward", "backward", original, nests=False)

    @functools.wraps(original)
    def backward(*args: Any, **kwargs: Any) -> Any:
        """`torch.autograd.backward`, stopped before when armed (and a DDP module syncs in it)."""
        return through(*args, **kwargs)

    backward.__ddptui_until__ = True  # type: ignore[attr-defined]
    _Points.backward = original
    autograd.backward = backward  # type: ignore[union-attr]
