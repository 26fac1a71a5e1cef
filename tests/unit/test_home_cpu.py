"""`home_cpu`: pins nest, and the last unpin gives the thread its CPUs back."""

from __future__ import annotations

import os

import pytest

from ddptui.core.transport import home_cpu

CPUS = os.sched_getaffinity(0)


@pytest.mark.skipif(len(CPUS) < 2, reason="nothing is pinned on a machine with one CPU to use")
def test_pins_nest_and_the_last_unpin_restores() -> None:
    try:
        assert home_cpu.pin() == home_cpu.choose(CPUS)
        assert home_cpu.pin() == home_cpu.choose(CPUS)  # a second job while the first runs
        assert os.sched_getaffinity(0) == {home_cpu.choose(CPUS)}
        home_cpu.unpin()
        assert os.sched_getaffinity(0) == {home_cpu.choose(CPUS)}
        home_cpu.unpin()
        assert os.sched_getaffinity(0) == CPUS
        home_cpu.unpin()  # unmatched: nothing happens
        assert os.sched_getaffinity(0) == CPUS
    finally:
        os.sched_setaffinity(0, CPUS)


def test_the_last_of_the_fastest_cpus_is_chosen() -> None:
    hybrid = {0: 1024, 1: 1024, 2: 1024, 3: 1024, 4: 400, 5: 400}.__getitem__  # 4 big, 2 efficiency
    assert home_cpu.choose({0, 1, 2, 3, 4, 5}, hybrid) == 3
    assert home_cpu.choose({4, 5}, hybrid) == 5
    assert home_cpu.choose({0, 2, 7}, lambda cpu: 0) == 7  # the kernel says nothing: the last
    assert home_cpu.capacity(max(CPUS)) >= 0
