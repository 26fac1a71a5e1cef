"""Point-to-point ops on real gloo ranks in batch mode: deadlock verdicts, and `:collectives` listing
the sends and receives of a torch.distributed.pipelining schedule."""

from __future__ import annotations

import re

from conftest import SCRIPTS, Runner, summary

DEADLOCK = "tests/scripts/p2p_deadlock.py"
RING = "tests/scripts/p2p_ring.py"
PIPELINE = "tests/scripts/pipeline_2stage.py"


KINDS = ("hang:", "deadlock:", "mismatch:", "early exit:", "skip:")
"""How verdict lines begin."""


def verdicts(stdout: str) -> list[str]:
    """The verdict lines of a transcript."""
    return [
        line[8:] for line in stdout.splitlines() if line.startswith("ddptui: ") and line[8:].startswith(KINDS)
    ]


def said_after(stdout: str, command: str) -> list[str]:
    """What ddptui said in answer to `command`: the `ddptui: ` lines after it up to the next prompt,
    but verdicts (a verdict found meanwhile may come before the answer or after it)."""
    lines = stdout.splitlines()
    start = lines.index(f"(ddptui) {command}") + 1
    answer = []
    for line in lines[start:]:
        if not line.startswith("ddptui: "):
            break
        answer.append(line[8:])
    return [line for line in answer if not line.startswith(KINDS)]


def rows(table: list[str]) -> list[list[str]]:
    """A `:collectives` table's lines as cells (the columns are two spaces or more apart)."""
    return [re.split(r" {2,}", line.strip()) for line in table]


def test_two_ranks_each_in_a_recv_from_the_other_deadlock(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "p2p_deadlock.py", ":collectives\n")
    assert verdicts(result.stdout) == [
        f"deadlock: rank 0 waits in recv from rank 1 ({DEADLOCK}:9); rank 1 waits in recv from rank 0 "
        f"({DEADLOCK}:9); no send is pending"
    ]
    table = said_after(result.stdout, ":collectives")
    assert rows(table)[:2] == [["p2p"], ["transfer", "rank 0", "rank 1"]]
    assert sorted(rows(table)[2:]) == [  # by time: the two recvs came within a moment
        ["0→1 #1", "-", f"recv ← 0 [3] float32 {DEADLOCK}:9 (issued)"],
        ["1→0 #1", f"recv ← 1 [3] float32 {DEADLOCK}:9 (issued)", "-"],
    ]
    assert summary(result.stdout) == {r: f"waiting at {DEADLOCK}:9 in recv (ended by ddptui)" for r in (0, 1)}
    assert result.returncode == 1


def test_three_ranks_in_a_ring_of_irecvs_deadlock(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "p2p_ring.py", "", nproc=3)
    assert verdicts(result.stdout) == [
        f"deadlock: rank 0 waits in irecv from rank 2 ({RING}:10); rank 1 waits in irecv from rank 0 "
        f"({RING}:10); rank 2 waits in irecv from rank 1 ({RING}:10); no send is pending"
    ]


def test_collectives_lists_the_sends_and_receives_of_a_pipeline(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "pipeline_2stage.py", ":collectives 4\nc\n:collectives 3\n")
    out = result.stdout
    assert summary(out) == {0: "exited 0", 1: "exited 0"}, out
    assert verdicts(out) == []
    stage0, stage1 = f"{PIPELINE}:23", f"{PIPELINE}:26"
    forward = ["isend → 1 [2,8] float32 " + stage0, "irecv ← 0 [2,8] float32 " + stage1]
    backward = ["irecv ← 1 [2,8] float32 " + stage0, "isend → 0 [2,8] float32 " + stage1]
    header = [["p2p"], ["transfer", "rank 0", "rank 1"]]
    # stopped at the breakpoint after one step: its two microbatches forward, then backward
    assert rows(said_after(out, ":collectives 4")) == [
        *header,
        ["0→1 #4", *forward],
        ["0→1 #5", *forward],
        ["1→0 #4", *backward],
        ["1→0 #5", *backward],
    ]
    # after `c`, from the logs the ranks sent as they exited: the second step's
    assert rows(said_after(out, ":collectives 3")) == [
        *header,
        ["0→1 #7", *forward],
        ["1→0 #6", *backward],
        ["1→0 #7", *backward],
    ]
