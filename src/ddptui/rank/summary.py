"""Summaries of values evaluated in a rank, for `eval` and a cross-rank `:compare`. Standard library only.

`summarize(value)` returns a JSON-serialisable dict:

- `type`: the qualified type name (`int`, `torch.Tensor`, `torch.nn.parameter.Parameter`);
- `repr`: the repr, cut to `limit` characters plus a marker `… [cut, N chars|bytes|items]`; a huge
  string or list is never turned into one huge repr first;
- `key`: a short string, equal for equal values and different for different ones, that ranks are
  grouped by (see `_plain_key`, and `_tensor_key` in `ddptui.rank.tensor_summary`); `key_sampled`
  is true when it was computed from a sample of the value rather than all of it;
- `number`: the value as a float when it is a real number (not a bool) or a one-element tensor;
  absent otherwise;
- `tensor` (tensors only): `shape`, `dtype`, `device`, `requires_grad`, `local` (the local shard of
  a DTensor), `min`, `max`, `mean`, `norm`, `nan`, `inf`, `hash`, `hash_sampled`; for a DTensor
  also `dtensor` (`global_shape`, `placements`, `kinds` of placement, `mesh`, a `mesh_id` digest of
  the ranks it spans, this rank's `coordinate` on it); when the elements were not read, `note` says
  why (a pending collective, a freed storage, ...). Computed in `ddptui.rank.tensor_summary`.

Non-finite floats (in `number` and the tensor stats) travel as the strings `"nan"`, `"inf"` and
`"-inf"`, so the summary is strict JSON; a stat that does not apply is None.

Torch is never imported: a tensor is recognised by duck typing on the object the user's code
already has, and `sys.modules["torch"]` is only read once such an object is in hand.
"""

from __future__ import annotations

import hashlib
import numbers
from typing import Any

from ddptui.rank.tensor_summary import (
    SAMPLE_BLOCK,
    SAMPLE_BLOCKS,
    guard,
    json_float,
    local,
    safe_repr,
    tensor_data,
    tensor_fields,
    tensor_hash,
    tensor_of,
)

MARK = "…"
"""Ends a repr that was cut."""
KEY_INLINE = 64
"""Longest repr of a scalar used as its key as it is; longer ones are hashed."""
ELEMENT_BUDGET = 20_000
"""Container elements one key may look at: a list of 10M ints is keyed in milliseconds."""
BYTE_BUDGET = 1 << 26
"""Bytes of strings, buffers and tensors one key may hash whole before it samples."""
SCALARS = (type(None), bool, int, float, complex, str, bytes)
"""Types whose short repr is canonical and serves as the key itself."""
CONTAINERS = (list, tuple, dict, set, frozenset)
"""Exact builtin types whose repr is built piece by piece (subclasses may have their own repr)."""
OPEN_CLOSE: dict[type, tuple[str, str]] = {
    list: ("[", "]"),
    tuple: ("(", ")"),
    dict: ("{", "}"),
    set: ("{", "}"),
}
"""Brackets of the containers; frozenset wraps a set's."""


def summarize(value: object, limit: int = 2000) -> dict[str, Any]:
    """Summarise `value` for `eval` and `:compare`; never raises (see the module docstring)."""
    summary: dict[str, Any] = {"type": guard(lambda: type_name(value), "?")}
    summary["repr"] = guard(lambda: bounded_repr(value, limit), "<repr failed>")
    tensor = guard(lambda: tensor_of(value), None)
    if tensor is not None:
        summary.update(guard(lambda: tensor_fields(tensor), {"key": "tensor?", "key_sampled": False}))
    else:
        key, sampled = guard(lambda: _plain_key(value, summary["repr"], limit), ("?", True))
        summary.update(key=key, key_sampled=sampled)
        number = guard(lambda: _number(value), None)
        if number is not None:
            summary["number"] = number
    return summary


def type_name(value: object) -> str:
    """`int` for builtins, else `module.QualName`."""
    cls = type(value)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _number(value: object) -> float | str | None:
    """The value as a JSON float when it is a real number other than a bool; None otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return None
    try:
        return json_float(float(value))
    except OverflowError:  # an int too large for a float: no honest number to plot
        return None


# --- repr -------------------------------------------------------------------------------------------


def bounded_repr(value: object, limit: int) -> str:
    """The repr of `value` cut to `limit` characters, without building a longer one of a builtin."""
    try:
        builder = _ReprBuilder(limit)
        builder.add(value)
    except Exception as error:
        return f"<repr failed: {type(error).__name__}: {error}>"[: max(limit, 80)]
    text = "".join(builder.parts)
    if builder.size <= limit:
        return text
    return f"{text[:limit]}{MARK} [cut, {_size_note(value, builder.size)}]"


def _size_note(value: object, built: int) -> str:
    """How big the cut value is: characters of a string, bytes, items of a container."""
    if isinstance(value, str):
        return f"{len(value)} chars"
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes"
    if type(value) in CONTAINERS:
        return f"{len(value)} items"  # type: ignore[arg-type]
    return f"{built} chars"  # any other type's repr was built whole, so its length is known


class _ReprBuilder:
    """Builds a repr piece by piece, as the builtin repr would, and stops past `limit` characters."""

    def __init__(self, limit: int) -> None:
        """Start empty."""
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0
        self.open: set[int] = set()
        """Containers being built: one met again is a cycle, shown as `[...]` like the builtin."""

    def put(self, text: str) -> None:
        """Append a piece."""
        self.parts.append(text)
        self.size += len(text)

    def add(self, value: object) -> None:
        """Append the repr of `value`, or as much as the limit needs."""
        if self.size > self.limit:
            return
        cls = type(value)
        if cls in (str, bytes, bytearray):
            # Slice first: one character more than fits is enough to know it was cut.
            self.put(repr(value[: self.limit - self.size + 1]))  # type: ignore[index]
        elif cls in CONTAINERS and id(value) in self.open:
            self.put("[...]" if cls is list else "{...}")
        elif cls in CONTAINERS:
            self.open.add(id(value))
            self._container(value)
            self.open.discard(id(value))
        else:
            self.put(_repr(value))

    def _container(self, value: Any) -> None:
        """Append a list, tuple, dict, set or frozenset item by item."""
        cls = type(value)
        if cls in (set, frozenset) and not value:
            self.put(f"{cls.__name__}()")
            return
        if cls is frozenset:
            self.put("frozenset(")
        opening, closing = OPEN_CLOSE[set if cls is frozenset else cls]
        self.put(opening)
        for index, item in enumerate(value.items() if cls is dict else value):
            if self.size > self.limit:
                return
            self.put(", " if index else "")
            if cls is dict:
                self.add(item[0])
                self.put(": ")
                item = item[1]
            self.add(item)
        self.put(",)" if cls is tuple and len(value) == 1 else closing)
        if cls is frozenset:
            self.put(")")


def _repr(value: object) -> str:
    """`repr(value)`, but a tensor torch must not print (a pending collective would be waited
    on, a freed storage read) described by its metadata instead."""
    tensor = tensor_of(value)
    described = safe_repr(tensor) if tensor is not None else None
    return repr(value) if described is None else described


# --- keys of plain values ---------------------------------------------------------------------------


def _plain_key(value: object, shown: str, limit: int) -> tuple[str, bool]:
    """The grouping key of a non-tensor value, and whether it was computed from a sample.

    A short scalar is keyed by its repr. Anything else by a blake2b digest of a canonical walk
    (`_Fingerprint`), not of its repr: the repr of a huge value must not be built, and a set's or
    dict's repr follows an order that differs between equal values (string hashing is salted per
    process, so equal sets print differently on two ranks).
    """
    name = type_name(value)
    if type(value) in SCALARS and len(shown) <= min(KEY_INLINE, limit):
        return f"{name}:{shown}", False
    fingerprint = _Fingerprint()
    fingerprint.feed(value)
    return f"{name}#{fingerprint.hash.hexdigest()}", fingerprint.sampled


def _utf8(text: str) -> bytes:
    """Encode any str, lone surrogates included."""
    return text.encode("utf-8", "surrogatepass")


def _spans(length: int, budget: int) -> list[tuple[int, int]]:
    """Index ranges to look at in a sequence: all of it within `budget`, else 64 even blocks."""
    if length <= budget:
        return [(0, length)]
    blocks = min(64, budget)
    size = budget // blocks if blocks else 0
    if size == 0:
        return []
    if blocks == 1:
        return [(0, size)]
    starts = (i * (length - size) // (blocks - 1) for i in range(blocks))
    return [(start, start + size) for start in starts]


class _Fingerprint:
    """A blake2b digest over a canonical walk of a value, bounded in elements and bytes.

    Equal values give equal digests: sets and dicts are walked in an order of their own (sorted
    element digests), not in iteration order. Beyond the budgets only a deterministic sample is
    walked (with every container's length) and `sampled` is set: two values differing only where
    nobody looked then share a key.
    """

    def __init__(self) -> None:
        """Start with full budgets."""
        self.hash = hashlib.blake2b(digest_size=16)
        self.elements = ELEMENT_BUDGET
        self.bytes = BYTE_BUDGET
        self.sampled = False
        self.open: set[int] = set()

    def feed(self, value: object) -> None:
        """Walk `value` into the digest."""
        self.elements -= 1
        cls = type(value)
        self.hash.update(f"{type_name(value)}\0".encode())
        if cls is str:
            self._data(value, _utf8)
        elif cls in (bytes, bytearray):
            self._data(value, bytes)
        elif cls is int:
            self.hash.update(hex(value).encode())  # type: ignore[arg-type]  # hex has no digit limit
        elif cls in CONTAINERS and id(value) in self.open:
            self.hash.update(b"<cycle>")
        elif cls in CONTAINERS:
            self.open.add(id(value))
            self._container(value)
            self.open.discard(id(value))
        elif (tensor := tensor_of(value)) is not None:
            self._tensor(tensor)
        else:
            self._other(value)

    def _data(self, value: Any, encode: Any) -> None:
        """Hash a string or bytes: whole within the byte budget, else a sample of it."""
        spans = _spans(len(value), max(self.bytes, 0))
        self.hash.update(f"{len(value)}:".encode())
        for start, stop in spans:
            self.hash.update(encode(value[start:stop]))
            self.bytes -= stop - start
        self.sampled |= spans != [(0, len(value))]

    def _container(self, value: Any) -> None:
        """Hash a list or tuple in order, a dict or set by its sorted element digests."""
        self.hash.update(f"{len(value)}[".encode())
        if type(value) in (list, tuple):
            spans = _spans(len(value), max(self.elements, 0))
            self.sampled |= spans != [(0, len(value))]
            for start, stop in spans:
                for item in value[start:stop]:
                    self.feed(item)
        elif len(value) <= self.elements:
            items = value.items() if type(value) is dict else value
            for digest in sorted(self._digest(item) for item in items):
                self.hash.update(digest)
        else:
            self.sampled = True  # a set's sample would depend on its salted order: length only
        self.hash.update(b"]")

    def _digest(self, value: object) -> bytes:
        """The digest of one element on its own, for order-free containers."""
        outer, self.hash = self.hash, hashlib.blake2b(digest_size=16)
        self.feed(value)
        inner, self.hash = self.hash, outer
        return inner.digest()

    def _tensor(self, tensor: Any) -> None:
        """Hash a tensor met inside a container: its shape, dtype and content hash."""
        tensor, _ = local(tensor)
        data, note = tensor_data(tensor)
        self.hash.update(f"{list(tensor.shape)}{tensor.dtype}{note or ''}".encode())
        if data is not None:
            limit = max(self.bytes, 0) // data.element_size()
            digest, sampled = tensor_hash(data, b"", limit)
            self.bytes -= (SAMPLE_BLOCKS * SAMPLE_BLOCK if sampled else data.numel()) * data.element_size()
            self.hash.update(digest.encode())
            self.sampled |= sampled

    def _other(self, value: object) -> None:
        """Hash a buffer (array.array, a numpy array) by its bytes, anything else by its repr."""
        try:
            view = memoryview(value)  # type: ignore[arg-type]
        except TypeError:
            view = None
        if view is not None and view.c_contiguous:
            self.hash.update(f"{view.format}{view.shape}".encode())
            self._data(view.cast("B"), bytes)
            return
        try:
            self._data(repr(value), _utf8)
        except Exception as error:
            self.hash.update(f"<repr failed: {type(error).__name__}: {error}>".encode())
