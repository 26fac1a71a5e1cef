"""Scale: 256 plain-Python ranks (torch ranks that many do not fit in memory) stepped in lockstep."""

from __future__ import annotations

import time

from conftest import SCRIPTS, Runner, rank_lines, summary

RANKS = 256
BUDGET = 120.0
"""Seconds the whole run may take (about 30 s on the project's 2-core machine)."""


def test_256_ranks_step_in_lockstep_meet_at_a_barrier_and_all_exit(ddptui: Runner) -> None:
    start = time.monotonic()
    result = ddptui.batch(
        SCRIPTS / "plain_barrier.py", "n\nn\nc\n", nproc=RANKS, stall=5.0, timeout=BUDGET + 60
    )
    took = time.monotonic() - start
    assert result.returncode == 0, result.stderr[-2000:]
    assert summary(result.stdout) == {rank: "exited 0" for rank in range(RANKS)}
    for rank in (0, 1, 127, 255):
        lines = rank_lines(result.stdout, rank)
        assert "-> value += 2" in lines  # two lockstep steps, every rank
        assert f"rank {rank} passed the barrier with value {rank * 10 + 3}" in lines
    assert took < BUDGET, f"256 ranks took {took:.0f} s"
