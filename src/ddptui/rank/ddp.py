"""`ddp` request: the DistributedDataParallel modules of this rank, their parameters, buffers and
gradients, each summarised by a content key so the core can compare them across ranks.

Standard library only: torch objects are reached through the objects the user's code made. The
modules are found by type name among the objects the garbage collector tracks (wherever the user
keeps them: a local, a global, an attribute).
"""

from __future__ import annotations

import gc
from typing import Any

from ddptui.rank.summary import summarize

DDP_TYPES = ("DistributedDataParallel",)
"""Class names of the wrappers looked for (torch's, and FSDP-style ones could join)."""


def ddp_modules() -> list[Any]:
    """Every live DDP wrapper in this process, oldest first.

    The types are picked first (a pass in C): a torch process holds some 10^5 objects, and
    asking each its type's name in Python would make the whole look much slower.
    """
    objects = gc.get_objects()
    wanted = {kind for kind in set(map(type, objects)) if kind.__name__ in DDP_TYPES}
    return [obj for obj in objects if type(obj) in wanted and hasattr(obj, "module")] if wanted else []


def _entry(name: str, tensor: Any) -> dict[str, Any]:
    """A tensor's name, content key and a few statistics (from `summarize`)."""
    summary = summarize(tensor, 200)
    stats = summary.get("tensor", {})
    return {"name": name, "key": summary.get("key"), "mean": stats.get("mean"), "norm": stats.get("norm")}


def describe(module: Any) -> dict[str, Any]:
    """One DDP module: parameters (with their gradients), buffers, and the parameters with no gradient."""
    params, grads, no_grad = [], [], []
    for name, param in module.module.named_parameters():
        params.append(_entry(name, param.detach()))
        if not param.requires_grad:
            continue
        if param.grad is None:
            no_grad.append(name)
        else:
            grads.append(_entry(name, param.grad))
    buffers = [_entry(name, buffer) for name, buffer in module.module.named_buffers()]
    return {
        "type": type(module.module).__name__,
        "params": params,
        "grads": grads,
        "no_grad": no_grad,
        "buffers": buffers,
    }


def ddp() -> list[dict[str, Any]]:
    """The `ddp` request's answer: one entry per DDP module."""
    return [describe(module) for module in ddp_modules()]
