"""Summaries of values evaluated in a rank: bounded reprs, grouping keys, numbers, tensor stats."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from ddptui.rank.summary import summarize


def roundtrip(value: object, limit: int = 2000) -> dict[str, Any]:
    """Summarise `value` and pass it through strict JSON, as the protocol would."""
    summary = summarize(value, limit)
    return dict(json.loads(json.dumps(summary, allow_nan=False)))


def test_plain_values() -> None:
    assert roundtrip(3) == {"type": "int", "repr": "3", "key": "int:3", "key_sampled": False, "number": 3.0}
    assert roundtrip("abc")["key"] == "str:'abc'"
    assert "number" not in roundtrip(True)
    assert "number" not in roundtrip("3")
    assert roundtrip(2.5)["number"] == 2.5


def test_non_finite_numbers_survive_strict_json() -> None:
    assert roundtrip(float("nan"))["number"] == "nan"
    assert roundtrip(float("-inf"))["number"] == "-inf"
    assert roundtrip(float("nan"))["key"] == roundtrip(float("nan"))["key"]


def test_equal_and_different_plain_values() -> None:
    big = list(range(1000))
    assert roundtrip(big)["key"] == roundtrip(list(range(1000)))["key"]
    assert roundtrip(big)["key"] != roundtrip([*big[:-1], -1])["key"]
    assert roundtrip({"a": 1, "b": 2})["key"] == roundtrip({"b": 2, "a": 1})["key"]
    assert roundtrip([1])["key"] != roundtrip((1,))["key"]
    assert roundtrip(1)["key"] != roundtrip(1.0)["key"]


def test_set_keys_do_not_depend_on_the_process_hash_salt() -> None:
    code = "from ddptui.rank.summary import summarize; print(summarize({'a', 'b', 'c', 'd'})['key'])"
    keys = {
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={"PYTHONHASHSEED": seed},
        ).stdout
        for seed in ("1", "2", "3")
    }
    assert len(keys) == 1


def test_reprs_match_the_builtin_when_short() -> None:
    cyclic: list[object] = [1]
    cyclic.append(cyclic)
    values: list[object] = [[1, "a", (2,), {3: None}], frozenset(), set(), (1,), {"x": {1}}, cyclic, b"\x00"]
    for value in values:
        assert roundtrip(value)["repr"] == repr(value)


def test_huge_string_is_cut_fast() -> None:
    text = "x" * (10 * 1024 * 1024)
    start = time.perf_counter()
    summary = roundtrip(text, limit=100)
    assert time.perf_counter() - start < 0.5  # ~0.04 s here; the margin is for a loaded machine
    assert summary["repr"] == "'" + "x" * 99 + "… [cut, 10485760 chars]"
    assert summary["key"] != roundtrip(text[:-1] + "y")["key"]
    assert not summary["key_sampled"]


def test_huge_list_is_cut_fast_and_keyed_by_a_sample() -> None:
    values = list(range(10_000_000))
    start = time.perf_counter()
    summary = roundtrip(values, limit=50)
    assert time.perf_counter() - start < 0.5  # ~0.01 s here
    assert summary["repr"].startswith("[0, 1, 2,")
    assert summary["repr"].endswith("… [cut, 10000000 items]")
    assert summary["key_sampled"]
    assert summary["key"] != roundtrip(values[:-1])["key"]


def test_a_repr_that_raises_does_not() -> None:
    class Broken:
        def __repr__(self) -> str:
            raise ValueError("no repr for you")

    summary = roundtrip(Broken())
    assert summary["repr"] == "<repr failed: ValueError: no repr for you>"
    assert summary["type"].endswith("Broken")
    assert roundtrip([Broken()])["repr"] == "<repr failed: ValueError: no repr for you>"
    assert roundtrip(10**5000)["repr"].startswith("<repr failed: ValueError:")
    assert roundtrip(10**5000)["key"] != roundtrip(10**5000 + 1)["key"]


def test_tensor_stats() -> None:
    torch = pytest.importorskip("torch")
    summary = roundtrip(torch.tensor([[1.0, -2.0], [float("nan"), 4.0]]))
    info = summary["tensor"]
    assert summary["type"] == "torch.Tensor"
    assert (info["shape"], info["dtype"], info["device"]) == ([2, 2], "float32", "cpu")
    assert (info["min"], info["max"], info["mean"], info["norm"]) == (-2.0, 4.0, 1.0, pytest.approx(21**0.5))
    assert (info["nan"], info["inf"], info["hash_sampled"]) == (1, 0, False)
    assert "number" not in summary
    assert roundtrip(torch.tensor([float("inf"), 1.0]))["tensor"]["max"] == "inf"


def test_tensor_stats_of_other_dtypes() -> None:
    torch = pytest.importorskip("torch")
    ints = roundtrip(torch.arange(5))["tensor"]
    assert (ints["min"], ints["max"], ints["mean"], ints["norm"]) == (0, 4, 2.0, None)
    flags = roundtrip(torch.tensor([True, False, True, True]))["tensor"]
    assert (flags["min"], flags["max"], flags["mean"]) == (0, 1, 0.75)
    half = roundtrip(torch.full((10,), 60000.0, dtype=torch.float16))["tensor"]
    assert half["mean"] == 60000.0  # a half-precision sum would overflow
    meta = roundtrip(torch.empty(3, device="meta"))
    assert meta["tensor"]["hash"] is None and meta["key"] == "tensor:float32[3] (meta tensor, no data)"


def test_one_element_tensor_has_a_number_and_requires_grad() -> None:
    torch = pytest.importorskip("torch")
    loss = torch.tensor(0.5, requires_grad=True) * 3
    summary = roundtrip(loss)
    assert summary["number"] == 1.5
    assert summary["tensor"]["requires_grad"] is True
    assert "grad_fn" in summary["repr"]
    assert loss.grad_fn is not None  # summarising did not touch the graph


def test_equal_tensors_share_a_key_and_one_change_splits_them() -> None:
    torch = pytest.importorskip("torch")
    first = torch.randn(1000)
    second = first.clone()
    assert roundtrip(first)["key"] == roundtrip(second)["key"]
    second[500] += 1e-6
    assert roundtrip(first)["key"] != roundtrip(second)["key"]
    assert roundtrip(first)["key"] == roundtrip(torch.nn.Parameter(first.clone()))["key"]
    assert roundtrip(first)["key"] != roundtrip(first.double())["key"]
    assert roundtrip(first)["key"] != roundtrip(first.view(10, 100))["key"]


def test_non_contiguous_tensors_are_hashed_in_logical_order() -> None:
    torch = pytest.importorskip("torch")
    matrix = torch.randn(30, 40)
    assert roundtrip(matrix.T)["key"] == roundtrip(matrix.T.contiguous())["key"]
    assert roundtrip(matrix.T)["key"] != roundtrip(matrix.T.flip(0))["key"]


def test_a_summarised_tensor_can_still_free_its_storage() -> None:
    """FSDP2 frees an unsharded parameter after each forward by resizing its storage to 0 bytes;
    a summary taken meanwhile (`:compare` at a breakpoint in `forward`) must leave that possible."""
    torch = pytest.importorskip("torch")
    for tensor in (torch.nn.Parameter(torch.randn(16, 4)), torch.randn(20_000_000)):  # whole; sampled
        assert roundtrip(tensor)["tensor"]["hash"]
        tensor.untyped_storage().resize_(0)
        assert tensor.untyped_storage().nbytes() == 0


def test_tensors_inside_containers_are_keyed_by_content() -> None:
    torch = pytest.importorskip("torch")
    weights = [torch.zeros(2000), torch.ones(3)]
    changed = [torch.zeros(2000), torch.ones(3)]
    changed[0][1234] = 1.0
    assert roundtrip(weights)["repr"] == roundtrip(changed)["repr"]  # torch elides the middle...
    assert roundtrip(weights)["key"] != roundtrip(changed)["key"]  # ...the key does not


def test_large_tensor_is_hashed_by_sample_and_still_sees_one_change() -> None:
    torch = pytest.importorskip("torch")
    big = torch.randn(20_000_000, generator=torch.Generator().manual_seed(0))
    summary = roundtrip(big)
    assert summary["tensor"]["hash_sampled"] and summary["key_sampled"]
    index = 12_345_677  # far from any sampled block
    original = big[index].clone()
    big[index] = torch.nextafter(original, torch.tensor(9.0))  # one ulp: the stats do not move
    changed = roundtrip(big)
    stats = ("min", "max", "mean", "norm")
    assert [changed["tensor"][k] for k in stats] == [summary["tensor"][k] for k in stats]
    assert changed["key"] != summary["key"]
    big[index] = original
    assert roundtrip(big)["key"] == summary["key"]


def test_importing_it_loads_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import ddptui.rank.summary; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "print(','.join(sorted(new - set(sys.stdlib_module_names) - {'ddptui'})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


def test_the_digest_without_numpy_sees_one_changed_byte() -> None:
    torch = pytest.importorskip("torch")
    from ddptui.rank.tensor_summary import _word_digest

    raw = torch.arange(3_000_001, dtype=torch.int32).view(torch.uint8)  # not a multiple of 8 bytes
    digest = _word_digest(raw, torch)
    assert _word_digest(raw.clone(), torch) == digest
    changed = raw.clone()
    changed[-1] ^= 1
    assert _word_digest(changed, torch) != digest
    swapped = raw.clone()
    swapped[:8], swapped[8:16] = raw[8:16], raw[:8]
    assert _word_digest(swapped, torch) != digest  # order counts, not only the sum
