"""Stop before the next collective: the rank side of `:until-collective`. Standard library only.

The core arms a one-shot stop (request `UntilArm`, `until_collective` on the wire) and sends `c`. Arming
puts thin wrappers around `torch.distributed`'s Python collective functions (or an import hook
that does so once torch loads); the first call on the main thread disarms, takes the wrappers out
again and opens a `RankPdb` prompt at the user's calling frame, before the collective runs. A
lockstep `n` there steps over the collective; `c` runs on. So an unarmed rank runs torch's own
functions, untouched: ~0 cost. DDP all-reduces the gradients from C++ inside `backward()`, so
`torch.autograd.backward` (what `loss.backward()` calls) is wrapped too: it stops when a DDP
module's last forward asked for that synchronisation. What it cannot see: other collectives issued
from C++ and ops called through references taken while no wrapper was in place; a rank blocked in
one shows as `waiting`.

`UntilPending` says what the stopped rank is about to enter, and disarms (a rank may have
stopped elsewhere: a breakpoint); `UntilHold` keeps it from entering that collective — any
command that would run it reopens the prompt instead — until `UntilRelease`.
"""

from __future__ import annotations

import bdb
import functools
import inspect
import sys
import threading
import types
from collections.abc import Callable
from typing import Any

from ddptui.rank import collectives, debugger
from ddptui.rank.asks import Armed
from ddptui.rank.call_sites import is_core_library, is_user_code
from ddptui.rank.ddp import ddp_modules
from ddptui.rank.hooks import C10D, when_imported

EXTRA_OPS = ("monitored_barrier",)
"""Stopped before too, beyond the ops `ddptui.rank.collectives` records."""
AUTOGRAD = "torch.autograd"
DDP_VIA = "DDP backward"
"""What the user called, for a stop before DDP's gradient all-reduces."""


class _Stop:
    """The one-shot stop and what the main thread is stopped before."""

    armed = False
    pending: dict[str, Any] | None = None
    """The collective the main thread is about to enter while its prompt is open there."""
    held = ""
    """Why the pending collective must not run (empty: it may)."""
    inside = False
    """True while the main thread runs a wrapped function (collectives inside it are part of it)."""
    originals: dict[str, Callable[..., Any]] = {}
    """Wrapped function name -> the function the wrapper replaced."""
    backward: Callable[..., Any] | None = None
    """`torch.autograd.backward` while the wrapper stands in for it."""
    ddp: list[Any] | None = None
    """The DDP modules, looked for at the first `backward` of an armed stop (None: not yet)."""
    lock = threading.Lock()


def arm() -> Armed:
    """Stop before the next collective the main thread enters; `hooked` is False until torch loads."""
    with _Stop.lock:
        _Stop.armed = True
        hooked = _install()
        if not hooked:
            _hook_import()
    return Armed(True, hooked)


def disarm() -> None:
    """Forget the stop; torch's own functions come back."""
    with _Stop.lock:
        _Stop.armed = False
        _uninstall()


def hold(why: str) -> bool:
    """Keep the stopped main thread from entering its pending collective, `why`; False when it
    is not stopped before one."""
    _Stop.held = (why or "it differs across ranks") if _Stop.pending else ""
    return bool(_Stop.held)


def release() -> bool:
    """Let a held main thread enter its collective."""
    _Stop.held = ""
    return True


def pending() -> dict[str, Any] | None:
    """What the stopped main thread is about to enter, with its sequence number; None elsewhere.

    The question ends the run to the next collective: a rank that stopped somewhere else (a
    breakpoint), or stayed held before its collective, is disarmed.
    """
    disarm()
    record = _Stop.pending
    if record is None:
        return None
    return dict(record, seq=next_seq(record["pg"], record["p2p"]), held=_Stop.held)


def next_seq(pg: str, p2p: bool) -> int:
    """The number the next collective on group `pg` gets, as the collective log numbers them.

    One more than the group's last recorded one: the Flight Recorder counts collectives per group
    (`_get_sequence_number_for_group()` counts point-to-point ops too, so drifts after a send).
    0 when unknown: the Flight Recorder keeps no point-to-point ops on gloo.
    """
    log = collectives.collective_log()
    seqs = [r["seq"] for r in log if "seq" in r and r["pg"] == pg and r["p2p"] == p2p]
    if p2p and not any(r.get("source") == "wrappers" for r in log):
        return 0
    return (seqs[-1] if seqs else 0) + 1


# -- the wrappers ----------------------------------------------------------------------------------


def _install() -> bool:
    """Wrap the collective functions of `distributed_c10d` and `torch.distributed`; False without them."""
    c10d = sys.modules.get(C10D)
    if c10d is None:
        return False
    _wrap_module(c10d)
    return True


def _wrap_module(c10d: Any) -> None:
    """Put a stopping wrapper around every collective function of `c10d` not wrapped yet, and
    around `torch.autograd.backward`."""
    _wrap_backward()
    package = sys.modules.get("torch.distributed")
    for name in (*collectives.OPS, *EXTRA_OPS):
        original = getattr(c10d, name, None)
        if original is None or name in _Stop.originals:
            continue
        wrapper = _wrapper(name, original)
        _Stop.originals[name] = original
        setattr(c10d, name, wrapper)
        if package is not None and getattr(package, name, None) is original:
            setattr(package, name, wrapper)


def _uninstall() -> None:
    """Put back the functions the wrappers replaced, where a wrapper still stands."""
    autograd = sys.modules.get(AUTOGRAD)
    if _Stop.backward is not None and getattr(getattr(autograd, "backward", None), "__ddptui_until__", False):
        autograd.backward = _Stop.backward  # type: ignore[union-attr]
    _Stop.backward, _Stop.ddp = None, None  # the next arm looks for DDP modules again
    for namespace in (sys.modules.get(C10D), sys.modules.get("torch.distributed")):
        for name, original in _Stop.originals.items():
            current = getattr(namespace, name, None)
            if namespace is not None and getattr(current, "__ddptui_until__", False):
                setattr(namespace, name, original)
    _Stop.originals.clear()


def _wrapper(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    """`original`, stopping first when armed and called on the main thread."""
    params = list(inspect.signature(original).parameters)
    main = threading.main_thread().ident

    @functools.wraps(original)
    def until_wrapper(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() != main:
            return original(*args, **kwargs)
        if _Stop.armed and not _Stop.inside:
            call, caller = dict(zip(params, args, strict=False), **kwargs), sys._getframe(1)
            _stop(name, caller, lambda frame: about_to(name, call, frame, caller))
        outer, _Stop.inside = _Stop.inside, True  # `send` runs `isend`: one user call, one stop
        try:
            return original(*args, **kwargs)
        finally:
            _Stop.inside = outer

    until_wrapper.__ddptui_until__ = True  # type: ignore[attr-defined]
    return until_wrapper


def _wrap_backward() -> None:
    """Stop in `torch.autograd.backward` (`loss.backward()`) before DDP all-reduces gradients in it."""
    autograd = sys.modules.get(AUTOGRAD)
    original = getattr(autograd, "backward", None)
    if original is None or _Stop.backward is not None:
        return
    main = threading.main_thread().ident

    @functools.wraps(original)
    def until_backward(*args: Any, **kwargs: Any) -> Any:
        if threading.get_ident() == main and _Stop.armed and not _Stop.inside:
            modules = _syncing_ddp()
            if modules:
                _stop("all_reduce", sys._getframe(1), lambda frame: ddp_backward(modules, frame))
        return original(*args, **kwargs)

    until_backward.__ddptui_until__ = True  # type: ignore[attr-defined]
    _Stop.backward = original
    autograd.backward = until_backward  # type: ignore[union-attr]


def _syncing_ddp() -> list[Any]:
    """The DDP modules whose last forward asked for their gradients to be all-reduced in backward.

    (Outside `no_sync()`, with grad enabled: DDP's own flags. Looked for once per armed stop:
    the garbage collector's objects are many.)
    """
    if "torch.nn.parallel.distributed" not in sys.modules:
        return []
    if _Stop.ddp is None:
        _Stop.ddp = ddp_modules()
    return [
        m
        for m in _Stop.ddp
        if getattr(m, "require_backward_grad_sync", False) and getattr(m, "require_forward_param_sync", False)
    ]


def _hook_import() -> None:
    """Wrap the collectives as torch.distributed loads (if a stop is still armed then)."""
    when_imported(C10D, _wrap_if_armed)


def _wrap_if_armed(module: Any) -> None:
    """Wrap a freshly loaded `distributed_c10d` while a stop is armed."""
    with _Stop.lock:
        if _Stop.armed:
            _wrap_module(module)


# -- the stop --------------------------------------------------------------------------------------


def _stop(op: str, caller: types.FrameType, describe: Callable[[types.FrameType], dict[str, Any]]) -> None:
    """Disarm, then hold the main thread at a prompt in the user's frame until it may go on;
    `describe(frame)` says what it stopped before (an `about_to` record)."""
    with _Stop.lock:
        if not _Stop.armed:
            return
        _Stop.armed = False
        _uninstall()
    frame = user_frame(caller)
    try:
        _Stop.pending = describe(frame)
    except Exception as exc:  # describing the call must never keep the rank from stopping
        _Stop.pending = {"op": op, "pg": "?", "p2p": False, "error": f"{type(exc).__name__}: {exc}"}
    via = f" in {_Stop.pending['via']}" if _Stop.pending.get("via") else ""
    try:
        prompt(frame, f"--Collective: {_what(_Stop.pending)}{via}--")
        while _Stop.held:
            prompt(frame, f"ddptui: held before {op}, {_Stop.held}")
    finally:
        _Stop.pending, _Stop.held = None, ""


def _what(record: dict[str, Any]) -> str:
    """`all_reduce [3] float32`."""
    shapes = ",".join("[" + ",".join(map(str, shape)) + "]" for shape in record.get("shapes", ()))
    dtypes = ",".join(dict.fromkeys(record.get("dtypes", ())))
    return " ".join(part for part in (record["op"], shapes, dtypes) if part)


def user_frame(frame: types.FrameType) -> types.FrameType:
    """The innermost frame of the user's code from `frame` outwards (else outside torch and stdlib)."""
    outside = None
    probe: types.FrameType | None = frame
    while probe is not None:
        path = probe.f_code.co_filename
        if is_user_code(path):
            return probe
        if outside is None and not is_core_library(path):
            outside = probe
        probe = probe.f_back
    return outside or frame


def prompt(frame: types.FrameType, banner: str) -> None:
    """Open a `RankPdb` prompt at `frame` now, as `RankPdb.set_trace` does for `dist.breakpoint()`.

    The frames inside (torch, this module) are not the user's: `n` steps over the whole call.
    """
    pdb = debugger.RankPdb()
    pdb.stop_at(frame, banner)
    if pdb.quitting:  # `q`: as pdb's own dispatch would after the prompt
        raise bdb.BdbQuit


def about_to(
    op: str, args: dict[str, Any], frame: types.FrameType, caller: types.FrameType
) -> dict[str, Any]:
    """The collective call as a `collective_log` record (without `seq`), plus its group and peer."""
    param = collectives.OPS.get(op)
    tensors = args.get(param) if param else None
    inputs = [] if tensors is None else list(tensors) if isinstance(tensors, list | tuple) else [tensors]
    peer = next((args[k] for k in ("dst", "src", "group_dst", "group_src") if args.get(k) is not None), None)
    shapes = [list(t.shape) for t in inputs]
    dtypes = [collectives._dtype_name(t.dtype) for t in inputs]
    record = _record(op, args.get("group"), shapes, dtypes, frame, _entry(frame, caller, op))
    return dict(record, p2p=op in collectives.P2P_OPS, peer=peer)


def ddp_backward(modules: list[Any], frame: types.FrameType) -> dict[str, Any]:
    """DDP's gradient all-reduces about to run in `backward()`, as one `about_to` record: the
    group of the first module, and the elements of the gradients it reduces per dtype (in as
    many buckets as DDP made)."""
    group = getattr(modules[0], "process_group", None)
    sizes: dict[str, int] = {}
    for module in modules:
        if getattr(module, "process_group", None) is not group:
            continue
        params = getattr(module, "_module_parameters", None) or list(module.module.parameters())
        for param in params:
            if param.requires_grad:
                dtype = collectives._dtype_name(param.dtype)
                sizes[dtype] = sizes.get(dtype, 0) + param.numel()
    return _record("all_reduce", group, [[size] for size in sizes.values()], list(sizes), frame, DDP_VIA)


def _record(
    op: str, group: Any, shapes: list[list[int]], dtypes: list[str], frame: types.FrameType, via: str
) -> dict[str, Any]:
    """A collective about to be entered at `frame` (`via`: what the user called, if not `op`)."""
    pg, desc = collectives._group_name(group)
    code = frame.f_code
    return {
        "op": op,
        "raw_op": op,
        "pg": pg,
        "pg_desc": desc,
        "members": _members(group),
        "shapes": shapes,
        "dtypes": dtypes,
        "out_shapes": [],
        "out_dtypes": [],
        "state": "next",
        "p2p": False,
        "peer": None,
        "site": [code.co_filename, frame.f_lineno or 0, code.co_name],
        "via": via,
        "source": "until",
    }


def _entry(frame: types.FrameType, caller: types.FrameType, op: str) -> str:
    """The torch function the user called when it is not `op` itself (`all_gather_object`).

    The outermost named function between the user's frame and the collective; torch's logging
    decorators (`wrapper`) and private helpers do not count.
    """
    called = ""
    probe: types.FrameType | None = caller
    while probe is not None and probe is not frame:
        name = probe.f_code.co_name
        if probe.f_globals.get("__name__", "").startswith("torch.") and not name.startswith("_"):
            called = name if name != "wrapper" else called
        probe = probe.f_back
    return "" if called == op else called


def _members(group: Any) -> list[int] | None:
    """The global ranks of a process group (the default group for None); None when unknown."""
    c10d = sys.modules.get(C10D)
    try:
        if group is None:
            group = c10d._get_default_group()  # type: ignore[union-attr]
        return [int(rank) for rank in c10d.get_process_group_ranks(group)]  # type: ignore[union-attr]
    except Exception:
        return None
