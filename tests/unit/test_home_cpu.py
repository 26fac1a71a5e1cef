"""`home_cpu`: pins nest, and the last unpin gives the thread its CPUs back."""

from __future__ import annotations

import os

import pytest

from ddptui.core import home_cpu

CPUS = os.sched_getaffinity(0)


@pytest.mark.skipif(len(CPUS) < 2, reason="nothing is pinned on a machine with one CPU to use")
def test_pins_nest_and_the_last_unpin_restores() -> None:
    try:
        assert home_cpu.pin() == max(CPUS)
        assert home_cpu.pin() == max(CPUS)  # a second job while the first runs
        assert os.sched_getaffinity(0) == {max(CPUS)}
        home_cpu.unpin()
        assert os.sched_getaffinity(0) == {max(CPUS)}
        home_cpu.unpin()
        assert os.sched_getaffinity(0) == CPUS
        home_cpu.unpin()  # unmatched: nothing happens
        assert os.sched_getaffinity(0) == CPUS
    finally:
        os.sched_setaffinity(0, CPUS)
