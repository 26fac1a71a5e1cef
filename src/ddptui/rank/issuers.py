"""Who issued a collective, read from the frames between the user's line and the call:
`FSDP2 all-gather for layers.0 (forward)`, `RowwiseParallel output: DTensor redistribute
Partial(sum)→Replicate()`, `pipeline stage 0 forward send`, `clip_grad_norm_`.

Standard library only: torch's objects are read by their attributes (an FSDP param group's
`_module_fqn`, a DTensor spec's `placements`, a pipeline stage's `stage_index`), at a stop only.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

MAX_FRAMES = 200
"""Frames looked through between the call and the user's line."""
FSDP_PHASES = {
    "pre_forward": "forward",
    "pre_backward": "backward",
    "post_backward": "backward",
    "_root_post_backward_final_callback": "backward",
    "_prefetch_unshard": "prefetch",
}
"""FSDP2's functions, and the phase a collective under them belongs to."""
PIPELINE_STEPS = {"fwd": "forward", "bwd": "backward"}
QUIET = frozenset(("wrapper", "apply", "inner", "fn", "decorate_context", "forward", "__call__"))
"""Function names that say nothing of who called (decorators, autograd's `apply`)."""
PLUMBING = (
    "torch.distributed.distributed_c10d", "torch.distributed.c10d_logger",
    "torch.distributed._functional_collectives", "torch.distributed._functional_collectives_impl",
    "torch._ops", "torch.nn.modules.module", "torch.utils", "torch.autograd.function",
    "torch.autograd.graph", "torch.distributed.tensor._dispatch", "torch.distributed.tensor._redistribute",
    "torch.distributed.tensor._sharding_prop", "torch.distributed.tensor._collective_utils",
    "torch.distributed.tensor.placement_types", "torch.distributed.tensor._ops",
)  # fmt: skip
"""Modules whose public functions are the collective itself, or carry any call (never its issuer)."""


def issuer(caller: types.FrameType, user: types.FrameType, op: str) -> str:
    """Who issued `op` (called from `caller`, the user's line at `user`); empty: the user's line itself."""
    frames = between(caller, user)
    finders: list[Callable[[], str]] = [
        lambda: fsdp2(frames, op),
        lambda: tp_style(frames),
        lambda: pipeline(frames),
        lambda: public(frames),
    ]
    family = next((text for text in (_safely(find) for find in finders) if text), "")
    detail = _safely(lambda: redistribute(frames))
    return ": ".join(part for part in (family, detail) if part and part != op)


def _safely(find: Callable[[], str]) -> str:
    """A finder's answer; empty when torch's objects were not as expected."""
    try:
        return find()
    except Exception:
        return ""


def between(caller: types.FrameType, user: types.FrameType) -> list[types.FrameType]:
    """The frames from `caller` outwards, up to (not including) `user`."""
    frames: list[types.FrameType] = []
    probe: types.FrameType | None = caller
    while probe is not None and probe is not user and len(frames) < MAX_FRAMES:
        frames.append(probe)
        probe = probe.f_back
    return frames


def _module(frame: types.FrameType) -> str:
    """The module a frame runs in."""
    return str(frame.f_globals.get("__name__", ""))


def fsdp2(frames: list[types.FrameType], op: str) -> str:
    """`FSDP2 all-gather for layers.0 (forward)`: an FSDP2 param group's collective."""
    group = next((f.f_locals["self"] for f in frames if _self_class(f) == "FSDPParamGroup"), None)
    if group is None:
        return ""
    fqn = getattr(group, "_module_fqn", None)
    name = "(root)" if fqn == "" else fqn or "?"
    kind = "all-gather" if "gather" in op else "reduce-scatter" if "scatter" in op else op.replace("_", "-")
    phases = [FSDP_PHASES[f.f_code.co_name] for f in frames if f.f_code.co_name in FSDP_PHASES]
    phase = next((p for p in reversed(phases) if p != "prefetch"), "")  # the outermost: forward, backward
    phase = f"{phase} prefetch".strip() if "prefetch" in phases else phase
    return f"FSDP2 {kind} for {name}" + (f" ({phase})" if phase else "")


def _self_class(frame: types.FrameType) -> str:
    """The class name of a method frame's `self`; empty for other frames."""
    if "self" not in frame.f_code.co_varnames[:1]:
        return ""
    return type(frame.f_locals.get("self")).__name__


def tp_style(frames: list[types.FrameType]) -> str:
    """`RowwiseParallel output`: a tensor parallel style preparing a module's inputs or outputs."""
    for frame in reversed(frames):  # the outermost: the style, not what it called
        name = frame.f_code.co_name
        if _module(frame).startswith("torch.distributed.tensor.parallel") and name.startswith("_prepare_"):
            style = frame.f_code.co_qualname.partition(".")[0]
            return f"{style} {'input' if 'input' in name else 'output'}"
    return ""


def pipeline(frames: list[types.FrameType]) -> str:
    """`pipeline stage 0 forward send`: a pipeline schedule's transfer between stages (the table
    says to or from which rank)."""
    ours = [f for f in frames if _module(f).startswith("torch.distributed.pipelining")]
    if not ours:
        return ""
    stage = next((i for i in map(_stage_index, ours) if i is not None), None)
    desc = next((str(f.f_locals["desc"]) for f in ours if isinstance(f.f_locals.get("desc"), str)), "")
    step, _, what = desc.partition("_")
    if what in ("send", "recv"):
        doing = f"{PIPELINE_STEPS.get(step, step)} {what}"
    else:  # the innermost of the pipeline's functions: `_warmup_forward_vote`
        doing = ours[0].f_code.co_name.strip("_").replace("_", " ")
    return " ".join(part for part in ("pipeline", "" if stage is None else f"stage {stage}", doing) if part)


def _stage_index(frame: types.FrameType) -> int | None:
    """The index of the pipeline stage a frame works for (`self` a stage or a single-stage
    schedule, or a local `stage`)."""
    local = frame.f_locals
    for holder in (local.get("stage"), local.get("self"), getattr(local.get("self"), "_stage", None)):
        index = getattr(holder, "stage_index", None)
        if isinstance(index, int):
            return index
    return None


def public(frames: list[types.FrameType]) -> str:
    """`clip_grad_norm_`, `SGD.step`: the outermost public torch function the user called, if it
    is not the collective itself."""
    for frame in reversed(frames):
        module, code = _module(frame), frame.f_code
        if not module.startswith("torch.") or module.startswith(PLUMBING):
            continue
        if code.co_name.startswith("_") or code.co_name in QUIET or "<" in code.co_qualname:
            continue
        return code.co_qualname
    return ""


def redistribute(frames: list[types.FrameType]) -> str:
    """`DTensor redistribute Partial(sum)→Replicate()`: a DTensor changing placements."""
    frame = next((f for f in frames if f.f_code.co_name == "redistribute_local_tensor"), None)
    if frame is None:
        return ""
    source, target = frame.f_locals.get("current_spec"), frame.f_locals.get("target_spec")
    return f"DTensor redistribute {_placements(source)}→{_placements(target)}"


def _placements(spec: Any) -> str:
    """`Shard(0)`, or `(Shard(0), Replicate())` on a mesh of more than one dimension."""
    placements = tuple(getattr(spec, "placements", ()) or ())
    text = ", ".join(map(repr, placements))
    return text if len(placements) == 1 else f"({text})"
