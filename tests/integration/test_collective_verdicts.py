"""Collective verdicts on real gloo ranks in batch mode: hang, deadlock, mismatch, early exit, root cause."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import SCRIPTS, Runner, summary

SCRIPT = SCRIPTS / "collective_bugs.py"
WHERE = "tests/scripts/collective_bugs.py"


def verdicts(stdout: str) -> list[str]:
    """The verdict lines of a transcript."""
    kinds = ("hang:", "deadlock:", "mismatch:", "early exit:", "skip:")
    return [
        line[len("ddptui: ") :]
        for line in stdout.splitlines()
        if line.startswith("ddptui: ") and line[8:].startswith(kinds)
    ]


def run(ddptui: Runner, scenario: str, commands: str = "", nproc: int = 2) -> tuple[int, str]:
    """A scenario in batch mode."""
    result = ddptui.run(
        "--nproc-per-node",
        str(nproc),
        "--stall-timeout",
        "2",
        "--batch",
        "-",
        str(SCRIPT),
        scenario,
        stdin=commands,
        timeout=120,
    )
    return result.returncode, result.stdout


def test_a_rank_that_skips_a_collective_is_named_with_the_collective(ddptui: Runner) -> None:
    code, out = run(ddptui, "skip")
    assert verdicts(out) == [
        f"hang: rank 1 is missing from collective #3 all_reduce [3] float32 ({WHERE}:24); "
        f"rank 1 completed #2 and is at {WHERE}:23"
    ]
    assert code == 1


def test_ranks_in_different_collectives_deadlock(ddptui: Runner) -> None:
    _, out = run(ddptui, "deadlock")
    assert verdicts(out) == [
        f"deadlock: rank 0 waits in #2 all_reduce ({WHERE}:28); rank 1 waits in #2 barrier ({WHERE}:30)"
    ]


def test_mismatched_shapes_fail_the_job_even_when_every_rank_exits_0(ddptui: Runner) -> None:
    code, out = run(ddptui, "mismatch")
    assert verdicts(out) == [
        f"mismatch: collective #1 all_reduce differs: rank 0 [3] float32 ({WHERE}:33), "
        f"rank 1 [4] float32 ({WHERE}:33)"
    ]
    assert summary(out) == {0: "exited 0", 1: "exited 0"} and code == 1


def test_a_rank_that_exits_early_is_the_cause(ddptui: Runner) -> None:
    _, out = run(ddptui, "early")
    assert verdicts(out)[0].startswith("early exit: rank 1 exited 0, but rank 0 ")
    states = summary(out)
    assert states[1] == "exited 0  ← root cause"
    assert states[0].startswith("crashed RuntimeError: [") and states[0].endswith("(consequence of rank 1)")
    assert out.splitlines().index("rank 1: exited 0  ← root cause") < out.splitlines().index(
        f"rank 0: {states[0]}"
    )


def test_the_root_cause_leads_the_summary(ddptui: Runner) -> None:
    _, out = run(ddptui, "crash", "@2 c\n", nproc=4)
    last = [line for line in out.splitlines() if line.startswith("rank ")]
    assert (
        last[0]
        == f"rank 2: crashed NameError: name 'undefined_name' is not defined ({WHERE}:45)  ← root cause"
    )
    consequences = [line for line in last[1:] if line.endswith("(consequence of rank 2)")]
    # gloo's peer errors, or still waiting in the all_reduce rank 2 never reached
    assert len(consequences) == 3, out
    assert all(
        "RuntimeError: [" in line or "in all_reduce (ended by ddptui)" in line for line in consequences
    )
    assert verdicts(out)[0].startswith("hang: rank 2 is missing from collective #2 all_reduce")


def test_log_dir_keeps_torchrun_error_files_and_flight_recorder_dumps(ddptui: Runner, tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    result = ddptui.run(
        "--nproc-per-node",
        "4",
        "--stall-timeout",
        "2",
        "--log-dir",
        str(logs),
        "--batch",
        "-",
        str(SCRIPT),
        "crash",
        stdin="@2 c\n",
        timeout=120,
    )
    error = json.loads((logs / "error-2.json").read_text())["message"]
    assert error["message"] == "NameError: name 'undefined_name' is not defined"
    assert f'File "{SCRIPT}", line 45, in <module>' in error["extraInfo"]["py_callstack"]
    assert int(error["extraInfo"]["timestamp"]) > 0
    assert json.loads((logs / "collectives-0.json").read_text())[0]["op"] == "all_reduce"
    assert sorted(p.name for p in logs.glob("fr_trace_rank_*")) == [f"fr_trace_rank_{r}" for r in range(4)]
    torchfrtrace = Path(sys.executable).parent / "torchfrtrace"
    analysis = subprocess.run(
        [str(torchfrtrace), str(logs), "-p", "fr_trace_rank_"], capture_output=True, text=True, timeout=60
    )
    assert "missing ranks: {2}" in analysis.stdout + analysis.stderr
    assert result.returncode != 0


def test_until_collective_in_batch_mode(ddptui: Runner) -> None:
    script = str(SCRIPTS / "until_job.py")
    ok = ddptui.run(
        "--stall-timeout", "3", "--batch", "-", script, "consistent", stdin=":uc\nn\nc\n", timeout=120
    )
    assert "ddptui: all 2 ranks about to enter #1 all_reduce [3] float32" in ok.stdout
    assert ok.returncode == 0, ok.stdout
    bad = ddptui.run(
        "--stall-timeout", "3", "--batch", "-", script, "mismatch", stdin=":uc\nn\n:state\n", timeout=120
    )
    assert "ddptui: mismatch: collective #1 all_reduce differs: rank 0 [3] float32" in bad.stdout
    state = bad.stdout.split("(ddptui) :state\n")[1]
    lines = Path(script).read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if text.endswith("# @all_reduce"))
    assert f"rank 0: paused at tests/scripts/until_job.py:{line}" in state  # held at its prompt, not hung
    assert f"rank 1: paused at tests/scripts/until_job.py:{line}" in state


# -- jobs on subgroups: a 2x2 (dp, tp) mesh, pairs made by new_group ------------------------------
# Groups are named by the job's topology (`Session.topology`, read from the ranks with their logs).

TP = "tests/scripts/tp_mismatch.py"
PAIRS = "tests/scripts/pair_skip.py"
ABORTED = "gloo aborted rank 2 there (Received data size doesn't match expected size)"


def test_a_gloo_abort_in_a_tp_group_is_a_mismatch_of_the_rank_that_passed_the_odd_shape(
    ddptui: Runner,
) -> None:
    result = ddptui.batch(SCRIPTS / "tp_mismatch.py", ":collectives\n", nproc=4, timeout=180)
    (verdict,) = verdicts(result.stdout)
    head, arrow, tail = verdict.partition(" → ")
    assert (
        head
        == f"mismatch: tp group [2,3] (dp=1) #2 all_reduce at {TP}:14: rank 3 passed [5] float32; {ABORTED}"
    )
    # rank 0 is said waiting there, or only rank 1 crashing there: it depends on which came first
    assert arrow and f"WORLD #2 barrier ({TP}:15)" in tail and "ranks 2-3" in tail, verdict
    states = summary(result.stdout)
    assert states[3].startswith("crashed RuntimeError: [") and states[3].endswith("← root cause")
    assert states[2].startswith(
        f"killed by SIGABRT, its main thread at {TP}:14 (in all_reduce): "
        "gloo::EnforceNotMet: [enforce fail at "
    )
    assert states[2].endswith("(consequence of rank 3)")
    assert result.stderr.startswith(
        "ddptui: rank 2 killed by SIGABRT after it joined the job, before any prompt, "
        f"its main thread at {TP}:14 (in all_reduce): gloo::EnforceNotMet: "
    )
    assert "Received data size doesn't match expected size." in result.stderr
    assert "first prompt" not in result.stderr and "Extension modules" not in result.stderr


def test_a_skip_in_a_pair_leads_the_wait_it_causes_in_world(ddptui: Runner) -> None:
    result = ddptui.batch(SCRIPTS / "pair_skip.py", ":collectives\n", nproc=4, timeout=180)
    (verdict,) = verdicts(result.stdout)
    assert verdict == (
        f"hang: rank 3 skipped group [2,3] #2 all_reduce [2] float32 ({PAIRS}:12) → rank 2 waits there"
        f" → ranks 0-1,3 wait in WORLD #1 barrier ({PAIRS}:13) for rank 2"
    ), verdict
    assert result.returncode == 1
