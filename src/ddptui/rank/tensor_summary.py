"""Summaries of tensors evaluated in a rank: shape, dtype, stats and a content hash, the `tensor`
entries and the grouping key of `ddptui.rank.summary`. Standard library only.

Torch is never imported: a tensor is recognised by duck typing on the object the user's code
already has, and `sys.modules["torch"]` is only read once such an object is in hand.

Inspection must never hurt the job: elements are read only through public torch calls on a plain
tensor whose storage holds them (`readable`). A pending `AsyncCollectiveTensor` is never waited on
(its peers may not have issued the collective), a subclass with its own dispatch is not run, and a
freed storage (FSDP2 frees unsharded parameters that way) is not touched: each of those is
described by its metadata and a `note` saying why its elements were not read.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from typing import Any

EXACT_HASH_ELEMENTS = 1 << 24
"""Tensors up to this many elements are hashed whole; larger ones by a sample (see `tensor_hash`)."""
SAMPLE_BLOCKS = 16384
"""Blocks in the sample of a large tensor..."""
SAMPLE_BLOCK = 64
"""...each this many consecutive elements: 1M elements, hashed in a few ms."""
STATS_CHUNK = 1 << 18
"""Float stats run chunk by chunk: NaN masks stay in cache instead of allocating a whole tensor."""


def guard(compute: Any, fallback: Any) -> Any:
    """`compute()`, or `fallback` when it raises: a summary must not fail because a value is odd."""
    try:
        return compute()
    except Exception:
        return fallback


def json_float(value: float) -> float | str:
    """A float as strict JSON allows it: non-finite values become `"nan"`, `"inf"`, `"-inf"`."""
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def tensor_of(value: object) -> Any:
    """`value` when it is a torch tensor (by duck typing, torch is not imported), else None.

    The class is asked, not the value: a nested tensor's `shape` and a subclass's torch function
    may raise.
    """
    is_tensor = any(c.__name__ == "Tensor" and c.__module__.startswith("torch") for c in type(value).__mro__)
    if is_tensor and all(hasattr(type(value), a) for a in ("shape", "dtype", "numel", "detach")):
        return value
    return None


def is_dtensor(tensor: Any) -> bool:
    """Whether `tensor` is a DTensor (by its class, as torch is not imported)."""
    return _has_class(tensor, "DTensor", "torch.distributed")


def is_pending(tensor: Any) -> bool:
    """Whether `tensor` is an `AsyncCollectiveTensor` whose collective was not waited on yet."""
    return _has_class(tensor, "AsyncCollectiveTensor", "torch.distributed") and not getattr(
        tensor, "completed", False
    )


def _has_class(value: object, name: str, module: str) -> bool:
    """Whether a class of that name from that package is in the type's MRO."""
    return any(c.__name__ == name and c.__module__.startswith(module) for c in type(value).__mro__)


def local(tensor: Any) -> tuple[Any, bool]:
    """The local shard of a DTensor (and True), else the tensor itself (and False).

    Reducing or reshaping a DTensor would start collectives that the other ranks are not in;
    its `_local_tensor` is read as an attribute, so no autograd function runs.
    """
    if is_dtensor(tensor):
        shard = getattr(tensor, "_local_tensor", None)
        return (shard if shard is not None else tensor.to_local()), True
    return tensor, False


def dtensor_fields(tensor: Any) -> dict[str, Any]:
    """A DTensor's global shape, placements (and their kinds), mesh (dim names and sizes, which
    ranks it spans) and this rank's coordinate on it: metadata only, no collective (the core tells
    replicas from shards with it)."""
    mesh = tensor.device_mesh
    names = getattr(mesh, "mesh_dim_names", None) or [f"dim{i}" for i in range(mesh.ndim)]
    return {
        "global_shape": list(tensor.shape),
        "placements": [repr(p) for p in tensor.placements],
        "kinds": [placement_kind(p) for p in tensor.placements],
        "mesh": dict(zip(names, (int(size) for size in mesh.shape), strict=False)),
        "coordinate": guard(lambda: _coordinate(mesh), None),
        "mesh_id": guard(lambda: _mesh_id(mesh), None),
    }


def placement_kind(placement: Any) -> str:
    """`replicate`, `partial`, `shard` or `other`: what a placement says ranks along its mesh dim hold.

    Asked of the placement's own methods, with the class name as a fallback: `_StridedShard` (what
    FSDP2 puts on a mesh dim it shares with TP) says False to `is_shard()`.
    """
    if guard(placement.is_replicate, False):
        return "replicate"
    if guard(placement.is_partial, False):
        return "partial"
    if guard(placement.is_shard, False) or any("Shard" in c.__name__ for c in type(placement).__mro__):
        return "shard"
    return "other"


def _mesh_id(mesh: Any) -> str:
    """A digest of the global ranks the mesh spans, in its layout: equal on the ranks of one mesh,
    different on two meshes of one shape (`mesh["tp"]` of dp replica 0 and of dp replica 1).

    A digest, not the ranks: a summary per parameter of a 1024-rank job must stay small. The mesh's
    rank tensor is computed locally (~0.1 ms), without a collective.
    """
    ranks = mesh.mesh
    text = f"{list(ranks.shape)}:{ranks.flatten().tolist()}"
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def _coordinate(mesh: Any) -> list[int] | None:
    """This rank's index along each mesh dim (set when the mesh was made); None outside the mesh."""
    coordinate = mesh.get_coordinate()
    return None if coordinate is None else [int(index) for index in coordinate]


def readable(tensor: Any) -> tuple[Any, str | None]:
    """A plain tensor whose elements may be read safely, or None and why not.

    Only metadata is looked at until the answer is known: no element is read, no dispatch of a
    subclass runs, nothing waits.
    """
    torch: Any = sys.modules["torch"]
    with torch._C.DisableTorchFunctionSubclass():
        return _readable(tensor, torch)


def _readable(tensor: Any, torch: Any) -> tuple[Any, str | None]:
    """`readable` with subclasses' torch functions off."""
    if is_pending(tensor):
        return None, "pending collective, not waited on"
    if _has_class(tensor, "AsyncCollectiveTensor", "torch.distributed"):
        return _readable(tensor.elem, torch)
    if getattr(tensor, "is_nested", False):
        return None, "nested tensor"
    if str(tensor.layout) != "torch.strided":
        return None, f"{str(tensor.layout).removeprefix('torch.')} layout"
    if tensor.device.type == "meta":
        return None, "meta tensor, no data"
    if _own_dispatch(type(tensor), torch):
        return None, f"tensor subclass {type(tensor).__name__}"
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        tensor = tensor.as_subclass(torch.Tensor)  # shares the storage
    if not _storage_holds(tensor):
        return None, "storage freed (resized to fewer bytes than the tensor spans)"
    return tensor, None


def _own_dispatch(cls: type, torch: Any) -> bool:
    """Whether a tensor class overrides `__torch_dispatch__` (a wrapper subclass: FakeTensor, ...)."""
    return getattr(cls, "__torch_dispatch__", None) is not torch.Tensor.__torch_dispatch__


def _storage_holds(tensor: Any) -> bool:
    """Whether the tensor's storage has every byte its shape and strides reach."""
    if tensor.numel() == 0:
        return True
    last = tensor.storage_offset() + sum(
        (n - 1) * s for n, s in zip(tensor.shape, tensor.stride(), strict=True)
    )
    return bool((last + 1) * tensor.element_size() <= tensor.untyped_storage().nbytes())


def tensor_fields(tensor: Any) -> dict[str, Any]:
    """The `tensor`, `key`, `key_sampled` and maybe `number` entries of a tensor's summary.

    A subclass's `__torch_function__` (user code, which may raise or start collectives) is kept
    out of every read.
    """
    with sys.modules["torch"]._C.DisableTorchFunctionSubclass():
        return _tensor_fields(tensor)


def _tensor_fields(tensor: Any) -> dict[str, Any]:
    """`tensor_fields` with subclasses' torch functions off."""
    dtensor = guard(lambda: dtensor_fields(tensor), None) if is_dtensor(tensor) else None
    tensor, is_local = local(tensor)
    info: dict[str, Any] = {
        "shape": guard(lambda: list(tensor.shape), None),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "device": str(tensor.device),
        "requires_grad": bool(tensor.requires_grad),
        "local": is_local,
        **dict.fromkeys(("min", "max", "mean", "norm", "nan", "inf", "hash")),
        "hash_sampled": False,
    }
    if dtensor is not None:
        info["dtensor"] = dtensor
    data, note = guard(lambda: tensor_data(tensor), (None, "elements could not be read"))
    if note is not None:
        info["note"] = note
    if data is not None:
        info.update(guard(lambda: _stats(data), {}))
        extra = json.dumps([info[k] for k in ("min", "max", "mean", "norm", "nan", "inf")]).encode()
        info["hash"], info["hash_sampled"] = guard(lambda: tensor_hash(data, extra), (None, False))
    fields: dict[str, Any] = {"tensor": info, "key": _tensor_key(info), "key_sampled": info["hash_sampled"]}
    number = guard(lambda: _tensor_number(data), None) if data is not None else None
    if number is not None:
        fields["number"] = number
    return fields


def _tensor_key(info: dict[str, Any]) -> str:
    """`tensor:float32[3, 4]#<hash>`: content, shape and dtype; not the device (cuda:0 on rank 0 and
    cuda:1 on rank 1 hold equal values), not requires_grad, not the subclass."""
    key = f"tensor:{info['dtype']}{info['shape']}"
    if info["hash"] is not None:
        return f"{key}#{info['hash']}"
    return f"{key} ({info['note']})" if info.get("note") else key


def _tensor_number(data: Any) -> float | str | None:
    """The value of a one-element real, non-bool tensor."""
    if data.numel() != 1 or data.is_complex() or str(data.dtype) == "torch.bool":
        return None
    return json_float(float(data.item()))


def tensor_data(tensor: Any) -> tuple[Any, str | None]:
    """The tensor detached, resolved and flattened contiguous, or None and why its elements were
    not read (see `readable`); a quantized tensor's values dequantized."""
    plain, note = readable(tensor)
    if plain is None:
        return None, note
    data = plain.detach()
    if data.is_quantized:
        data = data.dequantize()
    return data.resolve_conj().resolve_neg().contiguous().reshape(-1), None


def safe_repr(tensor: Any) -> str | None:
    """A repr of a tensor that must not be printed by torch (printing reads or waits), else None."""
    with sys.modules["torch"]._C.DisableTorchFunctionSubclass():
        plain, note = readable(local(tensor)[0])
        if plain is not None:
            return None
        shape = guard(lambda: list(tensor.shape), "irregular")
        dtype = str(tensor.dtype).removeprefix("torch.")
    return f"{type(tensor).__name__}(shape={shape}, dtype={dtype}: {note})"


def _stats(flat: Any) -> dict[str, Any]:
    """min, max, mean, norm and NaN/inf counts, by dtype: floats fully, ints without a norm,
    bools as 0/1 with the fraction of True as mean, complex numbers only the norm and counts."""
    if flat.numel() == 0:
        return {"nan": 0, "inf": 0}
    if flat.is_floating_point():
        return _float_stats(flat)
    if flat.is_complex():
        nan, inf = int(flat.isnan().count_nonzero()), int(flat.isinf().count_nonzero())
        return {"norm": json_float(float(flat.norm())), "nan": nan, "inf": inf}
    low, high = flat.aminmax()
    if str(flat.dtype) == "torch.bool":
        mean = int(flat.count_nonzero()) / flat.numel()
        return {"min": int(low), "max": int(high), "mean": mean, "nan": 0, "inf": 0}
    mean = json_float(int(flat.sum()) / flat.numel())
    return {"min": int(low), "max": int(high), "mean": mean, "nan": 0, "inf": 0}


def _float_stats(flat: Any) -> dict[str, Any]:
    """Stats of a float tensor over its non-NaN elements, with the NaN count beside them.

    Chunked: the common all-finite chunk costs one aminmax, one sum and one norm; only a chunk with
    a NaN or inf pays for masks, which at chunk size stay in cache (whole-tensor masks of 1e8
    elements cost ~0.3 s each). Half-precision chunks are widened so sums do not overflow.
    """
    low, high, total, squares, count, nan, inf = math.inf, -math.inf, 0.0, 0.0, 0, 0, 0
    for chunk in flat.split(STATS_CHUNK):
        if chunk.element_size() < 4:
            chunk = chunk.float()
        lo, hi = (float(x) for x in chunk.aminmax())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            mask = chunk.isnan()
            if (nans := int(mask.count_nonzero())) > 0:
                nan, chunk = nan + nans, chunk[~mask]
                if chunk.numel() == 0:
                    continue
                lo, hi = (float(x) for x in chunk.aminmax())
            inf += int(chunk.isinf().count_nonzero())
        low, high, count = min(low, lo), max(high, hi), count + chunk.numel()
        total += float(chunk.sum())
        squares += float(chunk.norm()) ** 2
    if count == 0:
        return {"nan": nan, "inf": inf}
    stats = {"min": low, "max": high, "mean": total / count, "norm": math.sqrt(squares)}
    return {**{k: json_float(v) for k, v in stats.items()}, "nan": nan, "inf": inf}


def tensor_hash(flat: Any, extra: bytes, limit: int = EXACT_HASH_ELEMENTS) -> tuple[str, bool]:
    """blake2b of a flat tensor's bytes, and whether it was sampled.

    Up to `limit` elements (never fewer than a sample's) every byte is hashed. Beyond, hashing
    400 MB would take ~0.5 s, so the digest covers a deterministic sample (16384 evenly spaced blocks of
    64 elements, and the last 64), the wrapping 64-bit sum of all the tensor's bytes read as words
    (one fast pass that changes whenever any single element does), and `extra` (the exact stats).
    """
    digest = hashlib.blake2b(digest_size=16)
    if flat.numel() <= max(limit, SAMPLE_BLOCKS * SAMPLE_BLOCK):
        _hash_bytes(digest, flat)
        return digest.hexdigest(), False
    stride = flat.numel() // SAMPLE_BLOCKS
    _hash_bytes(digest, flat[: SAMPLE_BLOCKS * stride].view(SAMPLE_BLOCKS, stride)[:, :SAMPLE_BLOCK])
    _hash_bytes(digest, flat[-SAMPLE_BLOCK:])
    digest.update(_word_sum(flat))
    digest.update(extra)
    return digest.hexdigest(), True


HASH_CHUNK = 1 << 22
"""Bytes copied out at a time to be hashed (4 MiB)."""


def _hash_bytes(digest: Any, tensor: Any) -> None:
    """Feed a tensor's bytes to `digest`.

    The bytes are viewed as uint8, copied `HASH_CHUNK` at a time into a buffer of this function's
    own and handed over as its NumPy view (any dtype): a NumPy view of the tensor's own storage
    would make that storage never resizable again (FSDP2 frees an unsharded parameter by resizing
    its storage to 0 bytes after the forward). Without NumPy, as a weighted sum of the bytes'
    int64 words (`_word_digest`). No raw pointer is read.
    """
    torch: Any = sys.modules["torch"]
    raw = tensor.contiguous().cpu().reshape(-1).view(torch.uint8)
    if raw.numel() == 0:
        return
    chunk = raw.new_empty(min(raw.numel(), HASH_CHUNK))  # ours: its NumPy view harms nobody
    try:
        view = chunk.numpy()
    except (RuntimeError, TypeError):
        digest.update(_word_digest(raw, torch))
        return
    for start in range(0, raw.numel(), HASH_CHUNK):
        part = raw[start : start + HASH_CHUNK]
        chunk[: part.numel()].copy_(part)
        digest.update(view[: part.numel()])


WORD_CHUNK = 1 << 20
"""Words a chunk of `_word_digest`: its index and weight temporaries stay small."""


def _word_digest(raw: Any, torch: Any) -> bytes:
    """Two sums of the bytes' int64 words, each word times a weight made from its index (odd,
    so any one changed word changes both), wrapping: a content digest from torch ops alone."""
    padded = torch.cat([raw, raw.new_zeros(-raw.numel() % 8)]).view(torch.int64)
    first, second = 0, 0
    for start in range(0, padded.numel(), WORD_CHUNK):
        words = padded[start : start + WORD_CHUNK]
        index = torch.arange(start, start + words.numel(), dtype=torch.int64)
        first += int((words * (index * 0x9E3779B1 + 0x7F4A7C15 | 1)).sum())
        second += int((words * (index * 0x85EBCA77 + 0x2545F491 | 1)).sum())
    return f"{first % (1 << 64)}:{second % (1 << 64)}:{raw.numel()}".encode()


def _word_sum(flat: Any) -> bytes:
    """The tensor's bytes summed as native int64 words, wrapping, plus the leftover bytes.

    A change of any one element changes one word and so the sum; two changes could cancel.
    """
    torch: Any = sys.modules["torch"]
    raw = flat.view(torch.uint8)
    if raw.storage_offset() % 8:
        raw = raw.clone()  # viewing bytes as int64 needs an aligned start
    whole = raw.numel() // 8 * 8
    total = int(raw[:whole].view(torch.int64).sum()) % (1 << 64)
    tail = raw[whole:].cpu().tolist()
    return total.to_bytes(8, "little") + bytes(tail)
