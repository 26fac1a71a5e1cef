"""Stop before the next collective: the rank side of `:until-collective`. Standard library only.

The core arms a one-shot stop (request `UntilArm`, `until_collective` on the wire) and sends `c`.
Arming puts `until_points`' wrappers in place (or an import hook that does so once torch loads):
the `ProcessGroup` methods every `torch.distributed` collective ends in, whoever calls it (the
user, FSDP2, DTensor's c10d calls, pipelining's sends and receives), the functional collective
ops DTensor and tensor parallel issue, and `torch.autograd.backward`, where DDP all-reduces the
gradients from C++ (it stops there when a DDP module's last forward asked for that
synchronisation). The first such call on the main thread disarms, takes the wrappers out again
and opens a `RankPdb` prompt at the user's calling frame, before the collective runs; the record
says who issued it (`until_records`, `issuers`). A lockstep `n` there steps over the user's line,
collective and all; `c` runs on. So an unarmed rank runs torch's own functions, untouched: ~0
cost. What it cannot see: other collectives issued from C++ (DDP's broadcasts, compiled graphs)
and functional ops called by their overload (`.default`); a rank blocked in one shows as
`waiting`.

`UntilPending` says what the stopped rank is about to enter, and disarms (a rank may have
stopped elsewhere: a breakpoint); `UntilHold` keeps it from entering that collective — any
command that would run it reopens the prompt instead — until `UntilRelease`.
"""

from __future__ import annotations

import bdb
import sys
import threading
import types
from typing import Any

from ddptui.rank import collectives, debugger, until_points, until_records
from ddptui.rank.asks import Armed
from ddptui.rank.call_sites import is_core_library, is_user_code
from ddptui.rank.ddp import ddp_modules
from ddptui.rank.hooks import when_imported
from ddptui.rank.until_points import Call


class _Stop:
    """The one-shot stop and what the main thread is stopped before."""

    armed = False
    pending: dict[str, Any] | None = None
    """The collective the main thread is about to enter while its prompt is open there."""
    held = ""
    """Why the pending collective must not run (empty: it may)."""
    ddp: list[Any] | None = None
    """The DDP modules, looked for at the first `backward` of an armed stop (None: not yet)."""
    lock = threading.Lock()


def arm() -> Armed:
    """Stop before the next collective the main thread enters; `hooked` is False until torch loads."""
    with _Stop.lock:
        _Stop.armed = True
        hooked = until_points.install(_on_call)
        if not hooked:
            when_imported("torch", _install_if_armed)
    return Armed(True, hooked)


def disarm() -> None:
    """Forget the stop; torch's own functions come back."""
    with _Stop.lock:
        _Stop.armed, _Stop.ddp = False, None  # the next arm looks for DDP modules again
        until_points.uninstall()


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


# -- the points ----------------------------------------------------------------------------------


def _install_if_armed(torch: Any) -> None:
    """Put the points in place once torch has loaded, if a stop is still armed then."""
    with _Stop.lock:
        if _Stop.armed:
            until_points.install(_on_call)


def _on_call(call: Call) -> None:
    """The main thread is about to make `call`: stop before it when armed (a `backward` only when
    a DDP module all-reduces its gradients in it)."""
    if not _Stop.armed:
        return
    ddp = _syncing_ddp() if call.point == "backward" else None
    if ddp == []:
        return
    _stop(call, ddp)


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


# -- the stop --------------------------------------------------------------------------------------


def _stop(call: Call, ddp: list[Any] | None) -> None:
    """Disarm, then hold the main thread at a prompt in the user's frame until it may go on
    (`ddp`: the DDP modules a `backward` call all-reduces gradients of)."""
    with _Stop.lock:
        if not _Stop.armed:
            return
        _Stop.armed, _Stop.ddp = False, None
        until_points.uninstall()
    frame = user_frame(call.caller)
    try:
        _Stop.pending = until_records.describe(call, frame, ddp)
    except Exception as exc:  # describing the call must never keep the rank from stopping
        _Stop.pending = {"op": call.name, "pg": "?", "p2p": False, "error": f"{type(exc).__name__}: {exc}"}
    via = f" in {_Stop.pending['via']}" if _Stop.pending.get("via") else ""
    op = _Stop.pending["op"]
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
