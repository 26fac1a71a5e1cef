"""`replicas` request: the modules whose parameters are DTensors (FSDP2's `fully_shard`, tensor
parallel's `parallelize_module`), each parameter and gradient summarised with its content key and
its DTensor layout, so the core can check that replicas along replicated mesh dims are equal.

Standard library only: torch objects are reached through the objects the user's code made. The
modules are found among the objects the garbage collector tracks (wherever the user keeps them),
and only the outermost ones are kept: a model, not each of its layers. Nothing here starts a
collective or waits on one: a DTensor is summarised by its local shard (`ddptui.rank.summary`).
"""

from __future__ import annotations

import gc
import sys
from typing import Any

from ddptui.rank.summary import summarize
from ddptui.rank.tensor_summary import is_dtensor

FSDP_MODULE = "FSDPModule"
"""The class FSDP2's `fully_shard` mixes into a module: its parameters may be unsharded (plain
tensors) between forward and backward, yet it is a sharded module."""


def sharded_modules() -> list[Any]:
    """Every live outermost module holding DTensor parameters (or sharded by `fully_shard`).

    The module types are picked first (a pass in C, as `ddptui.rank.ddp` does): asking each of
    some 10^5 objects its type in Python would make the look much slower.
    """
    nn = sys.modules.get("torch.nn")
    if nn is None:
        return []
    objects = gc.get_objects()
    kinds = {kind for kind in set(map(type, objects)) if issubclass(kind, nn.Module)}
    modules = [obj for obj in objects if type(obj) in kinds]
    inner = {id(child) for module in modules for child in vars(module).get("_modules", {}).values()}
    return [module for module in modules if id(module) not in inner and _sharded(module)]


def _sharded(module: Any) -> bool:
    """Whether a module is FSDP2's or holds a DTensor parameter."""
    if any(kind.__name__ == FSDP_MODULE for kind in type(module).__mro__):
        return True
    return any(is_dtensor(param) for param in module.parameters())


def _entry(name: str, tensor: Any) -> dict[str, Any]:
    """A tensor's name, content key, a few statistics and its DTensor layout (None for a plain one)."""
    summary = summarize(tensor, 200)
    stats = summary.get("tensor", {})
    return {
        "name": name,
        "key": summary.get("key"),
        "mean": stats.get("mean"),
        "norm": stats.get("norm"),
        "dtensor": stats.get("dtensor"),
    }


def describe(module: Any) -> dict[str, Any]:
    """One sharded module: its parameters and the gradients they have."""
    params, grads = [], []
    for name, param in module.named_parameters():
        params.append(_entry(name, param))
        if param.grad is not None:
            grads.append(_entry(name, param.grad))
    return {"type": type(module).__name__, "params": params, "grads": grads}


def replicas() -> list[dict[str, Any]]:
    """The `replicas` request's answer: one entry per sharded module, oldest first."""
    return [describe(module) for module in sharded_modules()]
