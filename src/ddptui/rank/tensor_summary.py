"""Summaries of tensors evaluated in a rank: shape, dtype, stats and a content hash, the `tensor`
entries and the grouping key of `ddptui.rank.summary`. Standard library only.

Torch is never imported: a tensor is recognised by duck typing on the object the user's code
already has, and `sys.modules["torch"]` is only read once such an object is in hand.
"""

from __future__ import annotations

import ctypes
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
    """`value` when it is a torch tensor (by duck typing, torch is not imported), else None."""
    is_tensor = any(c.__name__ == "Tensor" and c.__module__.startswith("torch") for c in type(value).__mro__)
    if is_tensor and all(hasattr(value, a) for a in ("shape", "dtype", "numel", "detach")):
        return value
    return None


def local(tensor: Any) -> tuple[Any, bool]:
    """The local shard of a DTensor (and True), else the tensor itself (and False).

    Reducing or reshaping a DTensor would start collectives that the other ranks are not in.
    """
    if callable(getattr(tensor, "to_local", None)):
        return tensor.to_local(), True
    return tensor, False


def tensor_fields(tensor: Any) -> dict[str, Any]:
    """The `tensor`, `key`, `key_sampled` and maybe `number` entries of a tensor's summary."""
    tensor, is_local = local(tensor)
    info: dict[str, Any] = {
        "shape": list(tensor.shape),
        "dtype": str(tensor.dtype).removeprefix("torch."),
        "device": str(tensor.device),
        "requires_grad": bool(tensor.requires_grad),
        "local": is_local,
        **dict.fromkeys(("min", "max", "mean", "norm", "nan", "inf", "hash")),
        "hash_sampled": False,
    }
    data = guard(lambda: tensor_data(tensor), None)
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
    return f"{key}#{info['hash']}" if info["hash"] is not None else key


def _tensor_number(data: Any) -> float | str | None:
    """The value of a one-element real, non-bool tensor."""
    if data.numel() != 1 or data.is_complex() or str(data.dtype) == "torch.bool":
        return None
    return json_float(float(data.item()))


def tensor_data(tensor: Any) -> Any:
    """The tensor detached, resolved and flattened contiguous; None when it has no plain data."""
    data = tensor.detach()
    if str(data.layout) != "torch.strided" or data.is_quantized or data.device.type == "meta":
        return None
    return data.resolve_conj().resolve_neg().contiguous().reshape(-1)


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


def _hash_bytes(digest: Any, tensor: Any) -> None:
    """Feed a tensor's bytes to `digest`, without a copy when it is contiguous on the CPU.

    `bytes(t.untyped_storage())` copies element by element (0.8 s for 100k floats) and `.numpy()`
    needs numpy and a dtype numpy knows; a ctypes array over `data_ptr()` is a zero-copy buffer
    for any dtype, valid while `tensor` is alive (it is, for the duration of this call).
    """
    tensor = tensor.contiguous()
    if tensor.device.type != "cpu":
        tensor = tensor.cpu()
    size = tensor.numel() * tensor.element_size()
    if size:
        digest.update((ctypes.c_char * size).from_address(tensor.data_ptr()))


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
