"""What a stop before a collective is before: a call at one of `until_points`' points, as a
`collective_log` record (without `seq`). Standard library only; tensors are read for their shape
and dtype alone (never their values: an `AsyncCollectiveTensor` must not be waited on here).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from ddptui.rank import collectives
from ddptui.rank.hooks import C10D
from ddptui.rank.issuers import issuer
from ddptui.rank.until_points import Call

DDP_VIA = "DDP backward"
"""What the user called, for a stop before DDP's gradient all-reduces."""
C10D_OPS = frozenset((
    "all_reduce", "all_reduce_coalesced", "broadcast", "reduce", "all_gather", "all_gather_coalesced",
    "all_gather_into_tensor", "all_gather_single", "gather", "scatter", "reduce_scatter",
    "reduce_scatter_tensor", "reduce_scatter_single", "all_to_all", "all_to_all_single", "barrier",
    "monitored_barrier", "send", "recv", "isend", "irecv",
))  # fmt: skip
"""The `torch.distributed` collective functions a stop is named after, the outermost when one
calls another (`all_gather_into_tensor` runs `all_gather_single`); others are what called them
(`all_gather_object`, `batch_isend_irecv`)."""
C10D_FRAMES = (C10D, "torch.distributed.c10d_logger", "typing_extensions", "warnings", "ddptui.rank.p2p")
"""Modules of the frames between a `torch.distributed` function and its process group call (ddptui's
own p2p recorder among them: `send` runs `isend` through it)."""
PG_OPS: dict[str, tuple[str, int | None]] = {
    "allreduce": ("all_reduce", 0),
    "allreduce_coalesced": ("all_reduce_coalesced", 0),
    "allgather": ("all_gather", 1),
    "_allgather_base": ("all_gather_into_tensor", 1),
    "all_gather_single": ("all_gather_single", 1),
    "allgather_coalesced": ("all_gather_coalesced", 1),
    "allgather_into_tensor_coalesced": ("all_gather_into_tensor_coalesced", 1),
    "all_gather_single_coalesced": ("all_gather_single_coalesced", 1),
    "reduce_scatter": ("reduce_scatter", 1),
    "_reduce_scatter_base": ("reduce_scatter_tensor", 1),
    "reduce_scatter_single": ("reduce_scatter_single", 1),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter_tensor_coalesced", 1),
    "reduce_scatter_single_coalesced": ("reduce_scatter_single_coalesced", 1),
    "broadcast": ("broadcast", 0),
    "reduce": ("reduce", 0),
    "gather": ("gather", 1),
    "scatter": ("scatter", 0),  # the output: only the root passes inputs
    "alltoall": ("all_to_all", 1),
    "alltoall_base": ("all_to_all_single", 1),
    "all_to_all_single": ("all_to_all_single", 1),
    "barrier": ("barrier", None),
    "monitored_barrier": ("monitored_barrier", None),
    "send": ("send", 0),
    "recv": ("recv", 0),
    "recv_anysource": ("recv", 0),
}
"""`ProcessGroup` method -> the op it is named by when no `torch.distributed` function called it,
and the argument (after the group) holding its input tensors."""
P2P_METHODS = ("send", "recv", "recv_anysource")
P2P_FUNCTIONAL = ("isend", "irecv", "batch_p2p_ops")
BATCHES = {"batch_isend_irecv": "p2p_op_list", "_batch_p2p": "p2p_ops"}
"""Functions that issue a batch of `P2POp`s, and the argument holding it."""
PEER_FUNCTIONAL = {"broadcast": 1, "isend": 1, "irecv": 1}
"""Functional ops with a root or peer (a rank of the op's group), by its argument."""


def describe(call: Call, frame: types.FrameType, ddp: list[Any] | None = None) -> dict[str, Any]:
    """The record of `call`, the prompt open at the user's `frame` (`ddp`: the syncing DDP
    modules of a `backward` call)."""
    if call.point == "backward":
        return ddp_backward(ddp or [], frame)
    if call.point == "op":
        return functional(call, frame)
    return process_group(call, frame)


def process_group(call: Call, frame: types.FrameType) -> dict[str, Any]:
    """A `ProcessGroup` method call: named after the `torch.distributed` function that made it."""
    group, args = call.args[0], call.args[1:]
    default, at = PG_OPS.get(call.name, (call.name, None))
    op, called = c10d_names(call.caller, frame, default)
    tensors = args[at] if at is not None and at < len(args) else None
    p2p = call.name in P2P_METHODS
    peer = args[1] if p2p and call.name != "recv_anysource" and len(args) > 1 else _root(args)
    peer = global_rank(group, peer)
    by = issuer(call.caller, frame, op) or called
    record = dict(_record(op, group, tensors, frame, by), p2p=p2p, peer=peer)
    return dict(record, batch=p2p_batch(call.caller, frame, _flat(tensors))) if p2p else record


def functional(call: Call, frame: types.FrameType) -> dict[str, Any]:
    """A functional collective op (its group last, by name; its inputs first)."""
    args, op = call.args, call.name
    group = resolve_group(call.kwargs.get("group_name", args[-1] if args else None))
    tensors, peer = (args[0] if args else None), None
    batch = None
    if op == "batch_p2p_ops" and len(args) >= 4 and args[0]:
        batch = [
            _leg(str(o), global_rank(group, p), t) for o, p, t in zip(args[0], args[1], args[3], strict=False)
        ]
        op, peer, tensors = str(args[0][0]), args[1][0], args[3][0]
    elif op in PEER_FUNCTIONAL and len(args) > PEER_FUNCTIONAL[op]:
        peer = args[PEER_FUNCTIONAL[op]]
    p2p = call.name in P2P_FUNCTIONAL
    peer = global_rank(group, peer)
    record = dict(_record(op, group, tensors, frame, issuer(call.caller, frame, op)), p2p=p2p, peer=peer)
    return dict(record, batch=batch) if batch else record


def p2p_batch(
    caller: types.FrameType, user: types.FrameType, tensors: list[Any]
) -> list[dict[str, Any]] | None:
    """The sends and receives of the batch a point-to-point call on `tensors` is part of
    (`batch_isend_irecv`, a pipeline's `_batch_p2p`), from this one on: its peers may meet them in
    any order. None for a call on its own."""
    probe: types.FrameType | None = caller
    while probe is not None and probe is not user:
        name = BATCHES.get(probe.f_code.co_name)
        ops = probe.f_locals.get(name) if name else None
        if isinstance(ops, list) and len(ops) > 1:
            first = next((i for i, p in enumerate(ops) if any(p.tensor is t for t in tensors)), 0)
            return [_leg(getattr(p.op, "__name__", "?"), p.peer, p.tensor) for p in ops[first:]]
        probe = probe.f_back
    return None


def _leg(op: str, peer: int | None, tensor: Any) -> dict[str, Any]:
    """One send or receive of a batch (`peer`: a rank of the job)."""
    inputs = _flat(tensor)
    return {
        "op": op,
        "peer": peer,
        "shapes": [list(t.shape) for t in inputs],
        "dtypes": [collectives._dtype_name(t.dtype) for t in inputs],
    }


def ddp_backward(modules: list[Any], frame: types.FrameType) -> dict[str, Any]:
    """DDP's gradient all-reduces about to run in `backward()`, as one record: the group of the
    first module, and the elements of the gradients it reduces per dtype (in as many buckets as
    DDP made)."""
    group = getattr(modules[0], "process_group", None) if modules else None
    sizes: dict[str, int] = {}
    for module in modules:
        if getattr(module, "process_group", None) is not group:
            continue
        params = getattr(module, "_module_parameters", None) or list(module.module.parameters())
        for param in params:
            if param.requires_grad:
                dtype = collectives._dtype_name(param.dtype)
                sizes[dtype] = sizes.get(dtype, 0) + param.numel()
    record = _record("all_reduce", group, None, frame, DDP_VIA)
    return dict(record, shapes=[[size] for size in sizes.values()], dtypes=list(sizes))


def c10d_names(caller: types.FrameType, user: types.FrameType, default: str) -> tuple[str, str]:
    """(op, called): the outermost `torch.distributed` collective function on the way from the
    user to the process group (`default` without one), and the function around it the user
    called if another (`all_gather_object`, `batch_isend_irecv`)."""
    op = called = ""
    probe: types.FrameType | None = caller
    while probe is not None and probe is not user and probe.f_globals.get("__name__") in C10D_FRAMES:
        name = probe.f_code.co_name
        if probe.f_globals.get("__name__") == C10D and not name.startswith("_"):
            op, called = (name, called) if name in C10D_OPS else (op, name)
        probe = probe.f_back
    return op or default, called


def _record(op: str, group: Any, tensors: Any, frame: types.FrameType, via: str) -> dict[str, Any]:
    """A collective about to be entered at `frame` (`via`: who issued it, if not the user's line)."""
    pg, desc = collectives._group_name(group)
    code = frame.f_code
    inputs = list(_flat(tensors))
    return {
        "op": op,
        "raw_op": op,
        "pg": pg,
        "pg_desc": desc,
        "members": members(group),
        "shapes": [list(t.shape) for t in inputs],
        "dtypes": [collectives._dtype_name(t.dtype) for t in inputs],
        "out_shapes": [],
        "out_dtypes": [],
        "state": "next",
        "p2p": False,
        "peer": None,
        "site": [code.co_filename, frame.f_lineno or 0, code.co_name],
        "via": via,
        "source": "until",
    }


def _flat(tensors: Any) -> list[Any]:
    """The tensors of an argument: one, a list of them, or a list of lists (`reduce_scatter`)."""
    if isinstance(tensors, list | tuple):
        return [t for item in tensors for t in _flat(item)]
    return [tensors] if hasattr(tensors, "shape") and hasattr(tensors, "dtype") else []


def _root(args: tuple[Any, ...]) -> int | None:
    """The root rank (in its group) of a rooted collective's options (`BroadcastOptions`...)."""
    for arg in args:
        root = getattr(arg, "rootRank", None)
        if isinstance(root, int):
            return root
    return None


def global_rank(group: Any, rank: Any) -> int | None:
    """A rank of `group` as a rank of the job; None for none."""
    if not isinstance(rank, int) or rank < 0:
        return None
    try:
        return int(sys.modules[C10D].get_global_rank(group, rank))
    except Exception:
        return rank


def resolve_group(group: Any) -> Any:
    """The process group a functional op names (by its name, or itself)."""
    if not isinstance(group, str):
        return group
    try:
        return sys.modules[C10D]._resolve_process_group(group)
    except Exception:
        return None


def members(group: Any) -> list[int] | None:
    """The global ranks of a process group (the default group for None); None when unknown."""
    c10d = sys.modules.get(C10D)
    try:
        if group is None:
            group = c10d._get_default_group()  # type: ignore[union-attr]
        return [int(rank) for rank in c10d.get_process_group_ranks(group)]  # type: ignore[union-attr]
    except Exception:
        return None
