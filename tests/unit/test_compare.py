"""Cross-rank comparison: grouping, odd ranks, verdicts, tolerance, sparklines, the text table."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ddptui.core.diagnosis.compare import Answer, Comparison, Row, compare, describe_tensor, sparkline
from ddptui.rank.summary import summarize


def wire(value: object) -> dict[str, Any]:
    """A value as a rank would send it: summarised, then through JSON."""
    return dict(json.loads(json.dumps(summarize(value))))


def ranks_of(comparison: Comparison) -> list[set[int]]:
    """Each row's ranks, in row order."""
    return [set(row.ranks) for row in comparison.rows]


def test_all_equal_is_one_row() -> None:
    comparison = compare({rank: wire([1, 2, 3]) for rank in range(4)})
    assert comparison.rows == (Row(frozenset(range(4)), "[1, 2, 3]", odd=False, error=False),)
    assert comparison.verdict == "all 4 ranks equal"
    assert comparison.sparkline == ""
    assert comparison.lines() == ["all 4 ranks equal", "  ranks 0-3 │ [1, 2, 3]"]


def test_one_odd_rank() -> None:
    comparison = compare({0: wire("a"), 1: wire("b"), 2: wire("a"), 3: wire("a")})
    assert ranks_of(comparison) == [{0, 2, 3}, {1}]
    assert [row.odd for row in comparison.rows] == [False, True]
    assert comparison.verdict == "2 distinct values"
    assert comparison.lines() == ["2 distinct values", "  ranks 0,2-3 │ 'a'", "≠ rank 1      │ 'b'"]


def test_a_tie_makes_every_group_odd_and_orders_by_lowest_rank() -> None:
    comparison = compare({0: wire(1), 1: wire(2), 2: wire(2), 3: wire(1), 4: wire(3)})
    assert ranks_of(comparison) == [{0, 3}, {1, 2}, {4}]
    assert all(row.odd for row in comparison.rows)


def test_unseeded_linear_weights_differ_on_every_rank() -> None:
    torch = pytest.importorskip("torch")
    comparison = compare({rank: wire(torch.nn.Linear(8, 4).weight) for rank in range(4)})
    assert ranks_of(comparison) == [{0}, {1}, {2}, {3}]
    assert comparison.verdict == "4 distinct values"
    assert all(row.odd for row in comparison.rows)
    assert comparison.rows[0].text.startswith("tensor([4, 8], float32, cpu, requires_grad) min=")


def test_seeded_linear_weights_agree() -> None:
    torch = pytest.importorskip("torch")
    answers: dict[int, Answer] = {}
    for rank in range(4):
        torch.manual_seed(0)
        answers[rank] = wire(torch.nn.Linear(8, 4).weight)
    assert compare(answers).verdict == "all 4 ranks equal"


def test_nan_on_one_rank() -> None:
    torch = pytest.importorskip("torch")
    grads = {rank: torch.ones(3) for rank in range(4)}
    grads[2][1] = float("nan")
    comparison = compare({rank: wire(grad) for rank, grad in grads.items()})
    assert ranks_of(comparison) == [{0, 1, 3}, {2}]
    odd = comparison.rows[1]
    assert odd.odd and " nan=1 " in odd.text
    assert odd.text.startswith("tensor([3], float32, cpu) min=1 max=1 mean=1 norm=1.414 nan=1 hash=")


def test_error_on_one_rank() -> None:
    answers: dict[int, Answer] = {rank: wire(0.5) for rank in range(3)}
    error = "NameError: name 'loss' is not defined"
    answers[3] = error
    comparison = compare(answers)
    assert comparison.verdict == "3 ranks equal, 1 error"
    assert comparison.rows[1] == Row(frozenset({3}), error, odd=True, error=True)
    assert comparison.lines()[2] == "≠ rank 3    │ raised NameError: name 'loss' is not defined"
    assert comparison.sparkline == "▄▄▄·"  # the rank that raised has no bar


def test_errors_group_by_text_after_the_values() -> None:
    answers: dict[int, Answer] = {0: "KeyError: 'x'", 1: "KeyError: 'x'", 2: wire(1), 3: "ValueError: bad"}
    comparison = compare(answers)
    assert ranks_of(comparison) == [{2}, {0, 1}, {3}]
    assert [row.error for row in comparison.rows] == [False, True, True]
    assert [row.odd for row in comparison.rows] == [True, False, True]
    assert comparison.verdict == "1 rank equal, 3 errors"
    assert compare({0: "E", 1: "E"}).verdict == "2 errors"
    assert compare({}).verdict == "no answers"


def test_tolerance_groups_close_numbers() -> None:
    answers: dict[int, Answer] = {0: wire(1.0), 1: wire(1.0 + 1e-9), 2: wire(1.5), 3: wire(1.0 - 1e-9)}
    assert compare(answers).verdict == "4 distinct values"
    close = compare(answers, tol=1e-6)
    assert ranks_of(close) == [{0, 1, 3}, {2}]
    assert close.verdict == "2 distinct values (tol 1e-06)"
    assert compare({0: wire(1e6), 1: wire(1e6 + 0.5)}, tol=1e-6).verdict == "all 2 ranks equal (tol 1e-06)"
    assert compare({0: wire(float("nan")), 1: wire(float("nan")), 2: wire(0.0)}, tol=0.1).verdict == (
        "2 distinct values (tol 0.1)"
    )


def test_tolerance_groups_tensors_by_shape_dtype_and_stats() -> None:
    torch = pytest.importorskip("torch")
    base = torch.linspace(-1, 1, 100)
    answers: dict[int, Answer] = {
        0: wire(base),
        1: wire(base + 1e-7),
        2: wire(base.double()),
        3: wire(base.reshape(10, 10)),
        4: wire(base + 1e-2),
        5: wire(float(base.mean())),
    }
    comparison = compare(answers, tol=1e-5)
    assert ranks_of(comparison) == [{0, 1}, {2}, {3}, {4}, {5}]
    assert compare(answers).verdict == "6 distinct values"


def test_hand_made_tensor_summary_line() -> None:
    info = {
        "shape": [2, 3],
        "dtype": "float16",
        "device": "cuda:1",
        "requires_grad": True,
        "min": "-inf",
        "max": 123456.0,
        "mean": 0.000123456,
        "norm": None,
        "nan": 2,
        "inf": 1,
        "hash": "0123456789abcdef",
        "hash_sampled": True,
    }
    assert describe_tensor(info) == (
        "tensor([2, 3], float16, cuda:1, requires_grad) min=-inf max=1.235e+05 mean=0.0001235 "
        "nan=2 inf=1 hash≈01234567"
    )
    scalar = {"shape": [], "dtype": "int64", "device": "cpu", "min": 7, "max": 7, "mean": 7.0, "hash": "ff"}
    assert describe_tensor(scalar) == "tensor(7, int64, cpu) hash=ff"
    assert describe_tensor(scalar | {"shape": [1, 1]}) == "tensor([[7]], int64, cpu) hash=ff"


def test_sparkline_scales_numbers_and_marks_non_finite() -> None:
    answers: dict[int, Answer] = {rank: {"key": str(rank), "number": float(rank)} for rank in range(8)}
    assert sparkline(answers) == ("▁▂▃▄▅▆▇█", (0.0, 7.0))
    answers[2] = {"key": "n", "number": "nan"}
    answers[5] = {"key": "i", "number": "inf"}
    spark, scale = sparkline(answers)
    assert spark == "▁▂×▄▅↑▇█" and scale == (0.0, 7.0)
    assert sparkline({0: {"number": 3}, 1: {"number": 3}}) == ("▄▄", (3.0, 3.0))
    assert sparkline({0: {"number": 3}, 1: {"repr": "'x'"}}) == ("", None)


def test_sparkline_of_losses_from_real_tensors() -> None:
    torch = pytest.importorskip("torch")
    losses = [0.5, 1.0, float("nan"), 0.75]
    comparison = compare(
        {rank: wire(torch.tensor(loss, requires_grad=True) * 1) for rank, loss in enumerate(losses)}
    )
    assert comparison.sparkline == "▁█×▅"
    assert comparison.lines()[-1] == "  by rank │ ▁█×▅  0.5 … 1"
    assert comparison.rows[0].text.startswith("tensor(0.5, float32, cpu, requires_grad) hash=")


def test_lines_are_cut_to_the_width() -> None:
    comparison = compare({0: wire("x" * 500), 1: wire("y")})
    lines = comparison.lines(width=40)
    assert all(len(line) <= 40 for line in lines)
    assert lines[1].endswith("…")
    assert "\n" not in compare({0: wire({"a": "\n".join("abc")})}).rows[0].text
