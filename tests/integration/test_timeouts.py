"""Process-group timeouts survive a pause: real gloo ranks, one paused while the other waits on it."""

from __future__ import annotations

import re

import pytest
from conftest import SCRIPTS, Runner, rank_lines, summary

SCRIPT = SCRIPTS / "timeout_pause.py"
"""init_process_group(timeout=5 s); rank 0 stops before an all_reduce that rank 1 enters."""
USER_TIMEOUTS = "@0 p __import__('ddptui.rank.timeouts', fromlist=['_']).user_timeouts()\n"
PAUSE = "@0 !__import__('time').sleep(10)\n"
"""Keeps rank 0 paused 10 s more, twice the job's timeout, after rank 1 was found waiting."""
STALL = 14.0
"""Longer than PAUSE, so rank 0 sleeping at its prompt is never taken for a waiting rank."""


def waited(stdout: str, rank: int) -> int:
    """The seconds `rank` spent in the all_reduce, as the script printed them."""
    for line in rank_lines(stdout, rank):
        found = re.fullmatch(rf"rank {rank} sum 3 after (\d+) s", line)
        if found:
            return int(found.group(1))
    raise AssertionError(f"rank {rank} never left the all_reduce:\n{stdout}")


@pytest.mark.parametrize(
    ("detail", "subgroup", "asked"),
    [
        (False, False, "{'0': 5.0}"),
        (True, False, "{'0': 5.0}"),
        (True, True, "{'0': 5.0, '1': 4.0}"),
    ],
    ids=["world", "world-detail", "new_group-detail"],
)
def test_a_rank_waits_on_a_paused_peer_past_the_jobs_own_timeout(
    ddptui: Runner, detail: bool, subgroup: bool, asked: str
) -> None:
    if detail:  # the wrapper's helper group keeps the timeout it was made with: raised at creation
        ddptui.env["TORCH_DISTRIBUTED_DEBUG"] = "DETAIL"
    args = ["--subgroup"] if subgroup else []
    result = ddptui.run(
        "--nproc-per-node",
        "2",
        "--stall-timeout",
        str(STALL),
        "--batch",
        "-",
        str(SCRIPT),
        *args,
        stdin=USER_TIMEOUTS + PAUSE + "@0 c\n",
        timeout=90,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert rank_lines(out, 0)[2] == asked
    assert waited(out, 1) >= 10, "rank 1 sat in the all_reduce for twice its 5 s timeout and more"
    assert summary(out) == {0: "exited 0", 1: "exited 0"}


def test_without_the_raise_the_jobs_timeout_ends_the_wait(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPT, USER_TIMEOUTS, "--pg-timeout", "3", stall=STALL, timeout=90)
    out = result.stdout
    assert result.returncode != 0, out
    assert rank_lines(out, 0)[2] == "{}", (
        "a timeout above --pg-timeout is the job's own: nothing is suspended"
    )
    crashed = summary(out)[1]
    assert crashed.startswith("crashed RuntimeError: ") and "Timed out waiting 5000ms" in crashed, out
