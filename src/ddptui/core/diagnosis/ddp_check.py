"""`:ddp-check`: are the DDP replicas really replicas? Parameters, buffers and gradients compared
across ranks by content, and the parameters that got no gradient named.

The answer torch's own `TORCH_DISTRIBUTED_DEBUG=DETAIL` would give (which segfaults at `DDP(...)`
construction in torch 2.13's CPU build), computed by each rank (`ddp` request) and compared here.

Beyond DDP, the modules whose parameters are DTensors (FSDP2, tensor parallel: the `replicas`
request) get the same question asked of what must be equal: each parameter's and gradient's local
shards along the mesh dims it is replicated on (`ddptui.core.diagnosis.placements`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ddptui.core.diagnosis.placements import mismatch, replicas
from ddptui.core.model.targets import format_ranks, name_ranks
from ddptui.core.transport.interface import answered
from ddptui.rank.asks import Ddp, Replicas

if TYPE_CHECKING:
    from ddptui.core.session.session import Session

NO_GRADIENTS = "no gradients yet: run :ddp-check after loss.backward() (and before optimizer.zero_grad())"
"""What the check says before the first backward."""
DIFFERING_SHOWN = 3
"""Tensors whose replicas differ named at most, per kind; the rest counted."""
UNUSED_ERROR = "Expected to have finished reduction in the prior iteration"
"""torch's DDP error when a parameter got no gradient; it names none of them."""

Module = dict[str, Any]


async def ask(session: Session, ranks: Sequence[int]) -> dict[int, list[Module]]:
    """Each rank's DDP modules (ranks that cannot answer are left out)."""
    answers = await session.ask(Ddp(), ranks, 10.0)
    return answered(answers)


def check_lines(answers: Mapping[int, list[Module]]) -> list[str]:
    """What `:ddp-check` says about the ranks' DDP modules."""
    if not any(answers.values()):
        return ["no DistributedDataParallel module and no DTensor parameter on the target ranks"]
    lines = []
    count = max(len(modules) for modules in answers.values())
    for index in range(count):
        per_rank = {rank: modules[index] for rank, modules in answers.items() if index < len(modules)}
        lines += module_lines(per_rank, f"DDP module {index}" if count > 1 else "DDP module")
    return lines


def module_lines(per_rank: Mapping[int, Module], title: str) -> list[str]:
    """The verdicts for one DDP module across ranks."""
    first = per_rank[min(per_rank)]
    ranks = format_ranks(set(per_rank))
    sizes = f"{len(first['params'])} parameters, {len(first['buffers'])} buffers"
    lines = [f"{title} {first['type']} on ranks {ranks}: {sizes}"]
    lines += unused_lines(per_rank)
    lines += compare_lines("parameter", {r: m["params"] for r, m in per_rank.items()})
    lines += compare_lines("buffer", {r: m["buffers"] for r, m in per_rank.items()})
    if any(m["grads"] for m in per_rank.values()):
        lines += compare_lines("gradient", {r: m["grads"] for r, m in per_rank.items()})
    return lines


def unused_lines(per_rank: Mapping[int, Module]) -> list[str]:
    """The parameters without a gradient, ranks grouped by the same list."""
    if not any(m["grads"] for m in per_rank.values()):
        return [NO_GRADIENTS]
    groups: dict[tuple[str, ...], set[int]] = {}
    for rank, module in per_rank.items():
        groups.setdefault(tuple(module["no_grad"]), set()).add(rank)
    lines = []
    for names, ranks in groups.items():
        if names:
            lines.append(
                f"no gradient after backward on {name_ranks(ranks)}: {', '.join(names)} "
                "(not used in forward: use them, or DDP(..., find_unused_parameters=True))"
            )
    return lines or ["every parameter got a gradient"]


def compare_lines(kind: str, tensors: Mapping[int, list[dict[str, Any]]]) -> list[str]:
    """`parameters: equal on every rank`, or the first that differs and the one that differs most."""
    by_name: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, entries in tensors.items():
        for entry in entries:
            by_name.setdefault(entry["name"], {})[rank] = entry
    if not by_name:
        return []
    differing = [name for name, entries in by_name.items() if len({e["key"] for e in entries.values()}) > 1]
    if not differing:
        return [f"{kind}s: equal on every rank ({len(by_name)} compared)"]
    first = differing[0]
    count = f"{len(differing)} of {len(by_name)} differ"
    lines = [f"{kind} {first} differs across ranks: {_split(by_name[first])} ({count})"]
    worst = max(differing, key=lambda name: _spread(by_name[name]))
    if worst != first:
        lines.append(f"largest difference: {kind} {worst} (mean {_range(by_name[worst])})")
    else:
        lines.append(f"largest difference: that one (mean {_range(by_name[first])})")
    return lines


def _split(entries: Mapping[int, dict[str, Any]]) -> str:
    """`ranks 0,2-3 | rank 1`: the ranks grouped by equal content, largest group first."""
    groups: dict[Any, set[int]] = {}
    for rank, entry in entries.items():
        groups.setdefault(entry["key"], set()).add(rank)
    ordered = sorted(groups.values(), key=lambda ranks: (-len(ranks), min(ranks)))
    return " | ".join(f"rank{'s' if len(r) > 1 else ''} {format_ranks(r)}" for r in ordered)


def _means(entries: Mapping[int, dict[str, Any]]) -> list[float]:
    """The finite means of a tensor on each rank."""
    return [float(e["mean"]) for e in entries.values() if isinstance(e.get("mean"), int | float)]


def _spread(entries: Mapping[int, dict[str, Any]]) -> float:
    """How far apart the ranks' means are."""
    means = _means(entries)
    return max(means) - min(means) if means else 0.0


def _range(entries: Mapping[int, dict[str, Any]]) -> str:
    """`-0.0123 … 0.0456 across ranks`."""
    means = _means(entries)
    return f"{min(means):.4g} … {max(means):.4g} across ranks" if means else "unknown"


async def ddp_check(session: Session, ranks: Sequence[int]) -> list[str]:
    """Ask the ranks and compare: DDP modules, then modules with DTensor parameters."""
    ddp, sharded = await asyncio.gather(ask(session, ranks), session.ask(Replicas(), ranks, 10.0))
    if not any(answered(sharded).values()):
        return check_lines(ddp)
    return (check_lines(ddp) if any(ddp.values()) else []) + replica_check_lines(answered(sharded))


# --- replicas of DTensor parameters (FSDP2, tensor parallel) ----------------------------------------


def replica_check_lines(answers: Mapping[int, list[Module]]) -> list[str]:
    """What `:ddp-check` says about the ranks' modules with DTensor parameters."""
    lines = []
    count = max(len(modules) for modules in answers.values())
    for index in range(count):
        per_rank = {rank: modules[index] for rank, modules in answers.items() if index < len(modules)}
        first = per_rank[min(per_rank)]
        meshes = sorted({_mesh(e["dtensor"]) for e in first["params"] if isinstance(e.get("dtensor"), dict)})
        on = f", DTensors on mesh {' and '.join(meshes)}" if meshes else ""
        head = f"sharded module {first['type']} on ranks {format_ranks(set(per_rank))}"
        lines.append(f"{head}: {len(first['params'])} parameters{on}")
        lines += replica_lines("parameter", {rank: module["params"] for rank, module in per_rank.items()})
        grads = {rank: module["grads"] for rank, module in per_rank.items()}
        lines += replica_lines("gradient", grads) if any(grads.values()) else [NO_GRADIENTS]
    return lines


def replica_lines(kind: str, tensors: Mapping[int, list[dict[str, Any]]]) -> list[str]:
    """`parameters: replicas equal (...)`, or the tensors whose replicas differ and where."""
    by_name: dict[str, dict[int, dict[str, Any]]] = {}
    for rank, entries in tensors.items():
        for entry in entries:
            by_name.setdefault(entry["name"], {})[rank] = entry
    said = {name: _replica_verdict(entries) for name, entries in by_name.items()}
    differing = [(name, notes) for name, (_, notes) in said.items() if notes]
    if not differing:
        return [f"{kind}s: {_agreeing(said)}"] if said else []
    lines = [f"{kind} {name}: {note}" for name, notes in differing[:DIFFERING_SHOWN] for note in notes]
    if len(differing) > DIFFERING_SHOWN:
        lines.append(f"… and {len(differing) - DIFFERING_SHOWN} more {kind}s whose replicas differ")
    return [*lines, f"{kind}s: {len(differing)} of {len(by_name)} differ from their replicas"]


def _replica_verdict(entries: Mapping[int, dict[str, Any]]) -> tuple[str, list[str]]:
    """What one tensor's replicas have to agree along (`plain`, `tp`, `dp, tp`; `` when nothing
    is replicated) and the lines naming the ranks that differ (none when they agree)."""
    dtensors = {rank: entry.get("dtensor") for rank, entry in entries.items()}
    if all(dtensor is None for dtensor in dtensors.values()):
        keys = {entry["key"] for entry in entries.values()}
        return "plain", [] if len(keys) == 1 else [f"not a DTensor, differs across ranks: {_split(entries)}"]
    checked = replicas(dtensors, lambda a, b: entries[a]["key"] == entries[b]["key"])
    if checked is None:
        return "", [mismatch(dtensors)]
    return checked.layout.along(checked.layout.dims("replicate")), checked.notes()


def _agreeing(said: Mapping[str, tuple[str, list[str]]]) -> str:
    """`replicas equal (1 replicated along tp; 3 sharded on every mesh dim)`, or `no replicas to
    compare: all 4 sharded on every mesh dim`."""
    counts: dict[str, int] = {}
    for compared, _ in said.values():
        counts[compared] = counts.get(compared, 0) + 1
    if set(counts) == {""}:
        return f"no replicas to compare: all {counts['']} sharded on every mesh dim"
    parts = [f"{n} replicated along {along}" for along, n in counts.items() if along not in ("", "plain")]
    if "plain" in counts:
        plain = counts["plain"]
        parts.append(f"{plain} plain tensor{'s' if plain != 1 else ''}, equal on every rank")
    if "" in counts:
        parts.append(f"{counts['']} sharded on every mesh dim")
    return f"replicas equal ({'; '.join(parts)})"


def _mesh(dtensor: Mapping[str, Any]) -> str:
    """`dp=2 tp=2`."""
    return " ".join(f"{name}={size}" for name, size in dict(dtensor.get("mesh", {})).items())


async def explain_unused(session: Session, rank: int) -> None:
    """Under torch's error that names no parameter, name them (the rank is in post-mortem)."""
    for modules in (await ask(session, [rank])).values():
        for module in modules:
            if module["no_grad"]:
                names = ", ".join(module["no_grad"])
                session.log(f"DDP's 'Expected to have finished reduction' error: no gradient for {names}")
