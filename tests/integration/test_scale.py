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


def test_a_broadcast_names_the_ranks_left_waiting_once_per_place(ddptui: Runner) -> None:
    """Rank 5 crashes before the barrier: 11 ranks wait, at two lines; one note for each line."""
    result = ddptui.run(
        "--nproc-per-node", "12", "--stall-timeout", "2", "--batch", "-",
        str(SCRIPTS / "plain_barrier.py"), "--crash", "5", stdin="c\np value\n", timeout=120,
    )  # fmt: skip
    notes = [line for line in result.stdout.splitlines() if line.startswith("ddptui: ")]
    at = "tests/scripts/plain_barrier.py"
    assert notes == [
        f"ddptui: all-stop: rank 5 stopped at {at}:48 (crashed ValueError: rank 5 never reaches the barrier, "
        "in post-mortem); ranks 0-4,6-11 interrupted: each stops once its current call returns",
        f"ddptui: rank 0 waiting at {at}:34 in accept",
        f"ddptui: ranks 1-4,6-11 waiting at {at}:40",
        f"ddptui: p value not sent to rank 0, not at a prompt (waiting at {at}:34 in accept)",
        f"ddptui: p value not sent to ranks 1-4,6-11, not at a prompt (waiting at {at}:40)",
    ], result.stdout[-3000:]
