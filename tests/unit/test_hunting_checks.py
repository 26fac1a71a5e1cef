"""The checks `:until` and `:until-diverge` make at each stop, on answers as ranks give them."""

from __future__ import annotations

from test_compare_placements import by_tp

from ddptui.core.commands.hunting import diverge_check, truth_check
from ddptui.core.diagnosis.compare import Answer

AT = "train.py:9"


def number(value: float) -> Answer:
    """A rank's summary of a float."""
    return {"type": "float", "repr": repr(value), "key": repr(value), "number": value}


def truth(value: bool) -> Answer:
    """A rank's summary of its `bool(EXPR)`."""
    return {"type": "bool", "repr": repr(value), "key": repr(value)}


def test_until_is_found_where_a_rank_says_true_and_names_the_others() -> None:
    check = truth_check("loss.isnan()")
    assert check({0: truth(False), 1: truth(False)}, 2, AT) is None
    found = check({0: truth(False), 1: "NameError: x", 2: truth(True), 3: truth(False)}, 3, AT)
    assert found is not None
    assert found.lines == (
        f"loss.isnan() first true on rank 2 at {AT} (stop 3); ranks 0,3 false; rank 1 raised",
    )


def test_sharded_dtensors_do_not_diverge_but_a_replica_that_differs_does() -> None:
    check = diverge_check(":until-diverge w", "w", None)
    assert check(by_tp({0: "a", 1: "b", 2: "a", 3: "b"}), 1, AT) is None  # tp shards differ by design
    found = check(by_tp({0: "a", 1: "b", 2: "a", 3: "c"}), 4, AT)  # rank 3 left its dp replica, rank 1
    assert found is not None
    assert found.lines[0].startswith(f"at stop 4 ({AT}), w differs: ")
    assert "rank 3 (dp 1, tp 1) differs from its dp replica rank 1 (dp 0, tp 1)" in found.lines


def test_plain_values_diverge_across_every_rank_within_tol_and_errors_left_out() -> None:
    equal = {0: number(1.5), 1: number(1.5), 2: "NameError: x", 3: "NameError: x"}
    assert diverge_check(":until-diverge v", "v", None)(equal, 1, AT) is None
    apart = {0: number(1.5), 1: number(1.5), 2: number(1.4999), 3: number(1.4999)}
    assert diverge_check(":until-diverge v", "v", 1e-3)(apart, 1, AT) is None
    found = diverge_check(":until-diverge v", "v", None)(apart, 0, AT)
    assert found is not None
    assert (
        found.lines[0]
        == f"at stop 0 (before any continue, {AT}), v differs: ranks 0-1 = 1.5; ranks 2-3 = 1.4999"
    )
